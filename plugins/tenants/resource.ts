/**
 * The `tenant-directory` resource: the tenants of a service (id, backend upstream, policy, requests
 * per minute, classifiers, API keys), from a YAML file or inline, looked up by API key (see
 * directory.ts) or id. Backends are resolved against the service's upstreams when the service is
 * built, so a misspelt backend stops the build. A hot reload re-reads the file.
 *
 *   resources:
 *     tenants: { type: tenant-directory, file: tenants.yaml }
 */
import { defineResource, type FromSchema, type JsonSchema } from '../../runtime/index.ts';
import type { TenantDirectory } from './api.ts';
import { buildDirectory } from './directory.ts';
import { readTenantsFile } from './file.ts';
import { tenantSchema } from './schema.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  // One source: a file or a list (`properties: {x: true}` only satisfies ajv's strictRequired).
  oneOf: [
    { required: ['file'], properties: { file: true } },
    { required: ['tenants'], properties: { tenants: true } },
  ],
  properties: {
    file: {
      type: 'string',
      minLength: 1,
      description: 'YAML file with `tenants: [...]`, relative to the config file',
    },
    tenants: { type: 'array', items: tenantSchema, description: 'The tenants, inline' },
  },
} as const satisfies JsonSchema;
/** `{file: string; tenants?: TenantSpec[]} | {file?: string; tenants: TenantSpec[]}` (the oneOf). */
type Options = FromSchema<typeof optionsSchema>;

export default defineResource<Options, TenantDirectory>({
  type: 'tenant-directory',
  description: 'Tenants (backend, policy, requests per minute, classifiers, API keys) from a YAML file or inline',
  options: optionsSchema,
  async create(options, env) {
    if ((options.file === undefined) === (options.tenants === undefined)) {
      throw new Error('tenant-directory needs exactly one of `file` and `tenants`');
    }
    const file = options.file === undefined ? undefined : env.resolvePath(options.file);
    const specs = file ? await readTenantsFile(file) : (options.tenants ?? []);
    const directory = buildDirectory(specs, {
      upstream: (name) => env.upstream(name),
      logger: env.logger,
      environment: process.env,
      exposed: env.service.exposed,
    });
    const count = directory.list().length;
    env.logger.info({ tenants: count, ...(file ? { file } : {}) }, 'tenants loaded');
    return {
      value: directory,
      health: () => ({ ok: true, status: 'loaded', detail: { tenants: count } }),
      describe: () => ({ tenants: count, ...(file ? { file } : {}) }),
    };
  },
});
