/**
 * stype-resolve: which SType the JSON-RPC message on `ctx.state.rpc` is, from the registry.
 *
 * Precedence: a per-request override (`ctx.state.requested.stype`, set by the typed direct send
 * from `metadata.stype`), then the route's fixed `stype` option, then the registry's
 * resolution by method (and tool name for `tools/call`). The result goes to `ctx.state.stype` as
 * {id, version, status}, and `annotations.stype_source` says which of the three chose it.
 *
 * A message that resolves to nothing is left untyped (`annotations.stype_unresolved = true`):
 * later stages (schema-validate, policy) decide what an untyped message may do. An override that
 * names an SType the registry does not have is the caller's mistake: 404 `stype_not_found`.
 * Without `ctx.state.rpc` (e.g. a GET on the JSON-RPC route) the stage does nothing.
 */
import { definePlugin, type FromSchema, GatewayError, type JsonSchema, syncStage } from '../../runtime/index.ts';
import type { STypeRecord, STypeRegistry } from '../stype-registry/api.ts';
import { registryOption } from '../stype-registry/api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['registry'],
  properties: {
    registry: registryOption,
    stype: { type: 'string', minLength: 1, description: 'Fixed SType id for every message of this route.' },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'stype-resolve',
  description: 'Resolve the SType of the JSON-RPC message (method, tool name, or an override) from the registry.',
  // Without a parsed message it does nothing, so every later check would pass untyped.
  needs: ['rpc'],
  provides: ['stype'],
  options: optionsSchema,
  create(options, env) {
    const registry = env.resource<STypeRegistry>(options.registry);
    if (options.stype !== undefined && !registry.get(options.stype)) {
      throw new Error(`stype "${options.stype}" is not in the registry (${registry.dir})`);
    }
    return {
      // Not async: it awaits nothing (docs/performance.md, "Work per request").
      handle: syncStage((ctx, next) => {
        const rpc = ctx.state.rpc;
        if (!rpc) return next();
        const annotations = ctx.state.annotations;
        const override = ctx.state.requested?.stype;
        let record: STypeRecord | undefined;
        let source: string;
        if (typeof override === 'string') {
          record = registry.get(override);
          source = 'override';
          if (!record) {
            throw new GatewayError('not_found', `SType "${override}" is not in the registry`, {
              code: 'stype_not_found',
              details: { stype: override },
              extra: { available_stypes: registry.list().map((r) => r.id) },
            });
          }
        } else if (options.stype !== undefined) {
          // Checked at create(); a registry reload may have removed it since: then untyped.
          record = registry.get(options.stype);
          source = 'route';
        } else {
          record = registry.resolve(rpc.method, rpc.params);
          source = 'registry';
        }
        if (record) {
          ctx.state.stype = { id: record.id, version: record.version, status: record.status };
          annotations.stype_source = source;
        } else {
          annotations.stype_unresolved = true;
        }
        return next();
      }),
      describe: () => ({ registry: options.registry, ...(options.stype ? { stype: options.stype } : {}) }),
    };
  },
});
