/**
 * The `stype-registry` resource: the SType registry loaded from a directory of YAML files (see
 * load.ts for the layout and checks), exposed through the STypeRegistry contract of api.ts.
 *
 *   resources:
 *     registry: { type: stype-registry, dir: registry, namespace: everything }
 *
 * `reload()` re-reads the directory and swaps the snapshot atomically; a registry that fails to
 * load leaves the current one in place and the error is thrown to the caller.
 */
import { defineResource, type FromSchema, type JsonSchema, jsonrpcWire } from '../../runtime/index.ts';
import type { STypeRecord, STypeRegistry, STypeValidation } from './api.ts';
import { loadSnapshot, type Snapshot } from './load.ts';
import { search } from './search.ts';
import { toViolations } from './violations.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['dir'],
  properties: {
    dir: {
      type: 'string',
      minLength: 1,
      description: 'Registry directory (stypes/, profiles.yaml, policies/), relative to the config file',
    },
    namespace: {
      type: 'string',
      pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$',
      default: 'everything',
      description: 'Namespace of tool STypes: tools/call of `echo` resolves to `<namespace>.echo`',
    },
  },
} as const satisfies JsonSchema;

export type RegistryOptions = FromSchema<typeof optionsSchema>;

export default defineResource<RegistryOptions, STypeRegistry>({
  type: 'stype-registry',
  description: 'SType registry: semantic types (JSON Schemas), QoM profiles and policy documents from a directory',
  options: optionsSchema,
  async create(options, env) {
    const dir = env.resolvePath(options.dir);
    const namespace = options.namespace;
    let snap = await loadSnapshot(dir, namespace);
    const registry = createRegistry(dir, namespace, () => snap);
    const counts = () => ({
      path: dir,
      stypes_loaded: snap.records.length,
      approved: snap.records.filter((r) => r.status === 'approved').length,
      pending: snap.records.filter((r) => r.status === 'pending').length,
      profiles_loaded: snap.profiles.length,
      policies_loaded: snap.policies.length,
    });
    env.logger.info(counts(), 'SType registry loaded');
    return {
      value: registry,
      health: () => ({ ok: true, status: 'loaded', detail: counts() }),
      describe: counts,
      async reload() {
        snap = await loadSnapshot(dir, namespace);
        env.logger.info(counts(), 'SType registry reloaded');
      },
    };
  },
});

/** The contract over whichever snapshot is current (so a reload is seen by every holder). */
function createRegistry(dir: string, namespace: string, current: () => Snapshot): STypeRegistry {
  const check = (
    validate: ReturnType<Snapshot['validators']['get']>,
    payload: unknown,
    root: string,
  ): STypeValidation | undefined => {
    if (!validate) return undefined;
    const valid = validate(payload) as boolean;
    return { valid, violations: valid ? [] : toViolations(validate.errors, payload, root) };
  };
  return {
    dir,
    namespace,
    list: () => current().records,
    get: (id) => current().byId.get(id),
    resolve(method, params): STypeRecord | undefined {
      const snap = current();
      const call = jsonrpcWire.toolCallOf({ method, params });
      if (call) return call.name === null ? undefined : snap.byTool.get(call.name);
      return snap.byMethod.get(method);
    },
    validator: (id) => current().validators.get(id),
    outputValidator: (id) => current().outputValidators.get(id),
    validate: (id, payload, root = '$') => check(current().validators.get(id), payload, root),
    validateOutput: (id, payload, root = '$') => check(current().outputValidators.get(id), payload, root),
    profiles: () => current().profiles,
    profile: (name) => current().profileByName.get(name),
    policies: () => current().policies,
    policy: (name) => current().policyByName.get(name),
    search: (query) => search(current().index, query),
    idForTool: (tool) => current().byTool.get(tool)?.id,
  };
}
