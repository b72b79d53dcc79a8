/**
 * reload-api: reloads the whole service from a route of its own (terminal stage), for services
 * whose operators expect `POST /admin/reload` on the API port. The reload is the runtime's
 * transaction: config, policies, tenants, classifiers... are all read again and the new graph is
 * swapped in only if everything loads; otherwise nothing changes and the answer says why (422).
 * On success it answers {status: reloaded} plus, for each `report` entry, the names the named
 * resource now holds (from its describe(): a list's `name`s or an object's keys).
 */
import { definePlugin, type FromSchema, GatewayError, type JsonSchema, respond } from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    report: {
      type: 'object',
      default: {},
      description: 'Answer key → {resource, field?}: the names that resource holds after the reload.',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['resource'],
        properties: {
          resource: { type: 'string', minLength: 1, 'x-ref': 'resource' },
          field: {
            type: 'string',
            minLength: 1,
            description: "Field of the resource's describe() (default: the key).",
          },
        },
      },
    },
  },
} as const satisfies JsonSchema;
type ReloadApiOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ReloadApiOptions>({
  name: 'reload-api',
  description: 'Reload the whole service (transaction) and report what is loaded (POST /admin/reload).',
  options: optionsSchema,
  create(options, env) {
    return async (ctx) => {
      const reload = env.service.reload;
      if (!reload) throw new GatewayError('unavailable', 'Reload is not available in this process');
      const result = await reload();
      if (!result.ok) {
        throw new GatewayError(
          'validation_failed',
          `Reload refused, the running configuration is unchanged: ${result.error}`,
          {
            status: 422,
            details: { problems: result.problems ?? [] },
          },
        );
      }
      const body: Record<string, unknown> = { status: 'reloaded' };
      for (const [key, spec] of Object.entries(options.report)) {
        body[key] = names(result.resources[spec.resource]?.[spec.field ?? key]);
      }
      respond(ctx, body);
    };
  },
});

function names(value: unknown): string[] {
  if (Array.isArray(value)) {
    return value.map((v) => (v !== null && typeof v === 'object' && 'name' in v ? String(v.name) : String(v)));
  }
  if (value !== null && typeof value === 'object') return Object.keys(value);
  return [];
}
