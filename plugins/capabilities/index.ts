/**
 * capabilities: describes what the service enforces, derived from the running graph (never
 * restated in config, so it cannot drift from what actually runs). `enforcement` reports which
 * stages sit on the described route: schema-validate → schema_validation, qom-score →
 * qom_profiling, policy → policy_engine, and ic_assertions (interface-contract assertions:
 * result validation against output schemas and tool-definition pinning) when schema-validate
 * runs with validate_results or pin_check on.
 */
import { definePlugin, type FromSchema, type JsonSchema, respond } from '../../runtime/index.ts';
import type { STypeRegistry } from '../stype-registry/api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['route'],
  properties: {
    route: {
      type: 'string',
      'x-ref': 'route',
      description: 'Id of the route whose pipeline is described, e.g. "POST /".',
    },
    registry: { type: 'string', 'x-ref': 'resource', description: 'stype-registry resource to count.' },
    registry_path: { type: 'string', description: 'Registry location to report (default: the resource name).' },
    protocol: { type: 'string', default: 'jsonrpc-2.0' },
    metrics_format: {
      // What the metrics listener serves; anything else would be reported but not true.
      enum: ['prometheus'],
      default: 'prometheus',
      description: 'Format of the metrics listener, as reported.',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'capabilities',
  description: 'Answer the capabilities object: proxy, enforcement, registry and metrics.',
  options: optionsSchema,
  create(options, env) {
    const registry = options.registry ? env.resource<STypeRegistry>(options.registry) : undefined;
    return async (ctx) => {
      const route = env.introspect().routes.find((r) => r.id === options.route);
      const stages = route?.stages ?? [];
      const has = (plugin: string) => stages.some((s) => s.plugin === plugin);
      const validator = stages.find((s) => s.plugin === 'schema-validate')?.options as
        | { validate_results?: boolean; pin_check?: string }
        | undefined;
      respond(ctx, {
        proxy: { version: env.service.version, mode: route?.mode ?? 'permissive', protocol: options.protocol },
        enforcement: {
          schema_validation: has('schema-validate'),
          qom_profiling: has('qom-score'),
          ic_assertions: Boolean(validator && (validator.validate_results || (validator.pin_check ?? 'off') !== 'off')),
          policy_engine: has('policy'),
        },
        registry: {
          path: options.registry_path ?? options.registry ?? '',
          stypes_loaded: registry?.list().length ?? 0,
          profiles_loaded: registry?.profiles().length ?? 0,
          policies_loaded: registry?.policies().length ?? 0,
        },
        metrics: { port: env.service.ports.metrics ?? null, format: options.metrics_format },
      });
    };
  },
});
