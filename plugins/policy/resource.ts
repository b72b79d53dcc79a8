/**
 * `policy-set`: policies loaded once and shared by the stages of a service (ingress and egress
 * policy stages, the test-policy endpoint). Reload re-reads every file; a broken set is refused
 * and the current one stays.
 */
import { defineResource, type FromSchema, type JsonSchema } from '../../runtime/index.ts';
import type { STypeRegistry } from '../stype-registry/api.ts';
import { PolicyStore } from './store.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    dir: { type: 'string', minLength: 1, description: 'Directory whose *.yaml, *.yml and *.json files are loaded.' },
    files: { type: 'array', items: { type: 'string', minLength: 1 }, description: 'Policy files.' },
    registry: {
      type: 'string',
      minLength: 1,
      'x-ref': 'resource',
      description: 'stype-registry resource whose policy documents to load.',
    },
  },
} as const satisfies JsonSchema;
type PolicySetOptions = FromSchema<typeof optionsSchema>;

export const policySetResource = defineResource<PolicySetOptions, PolicyStore>({
  type: 'policy-set',
  description: 'Policy files (a directory, a list, and/or a registry) loaded once and shared by stages.',
  options: optionsSchema,
  async create(options, env) {
    const store = await PolicyStore.open({
      registry: options.registry ? env.resource<STypeRegistry>(options.registry) : undefined,
      files: (options.files ?? []).map((f) => env.resolvePath(f)),
      dirs: options.dir ? [env.resolvePath(options.dir)] : [],
    });
    env.logger.info({ policies: store.current.names, rules: store.current.ruleCount }, 'policies loaded');
    return {
      value: store,
      health: () => ({
        ok: true,
        status: 'loaded',
        detail: { policies: store.current.names, rules: store.current.ruleCount },
      }),
      describe: () => ({ policies: store.describe() }),
      async reload() {
        const set = await store.reload();
        env.logger.info({ policies: set.names, rules: set.ruleCount }, 'policies reloaded');
      },
    };
  },
});
