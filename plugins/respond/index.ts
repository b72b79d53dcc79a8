/**
 * respond: answers a fixed JSON body (terminal stage), e.g. a liveness probe's {status: alive}.
 * `{{version}}` and `{{service}}` in string values are replaced by the service's own.
 */
import { definePlugin, type FromSchema, type JsonSchema, respond } from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['body'],
  properties: {
    status: { type: 'integer', minimum: 200, maximum: 599, default: 200 },
    body: { description: 'The JSON body; {{version}} and {{service}} in strings are filled in.' },
  },
} as const satisfies JsonSchema;
type RespondOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<RespondOptions>({
  name: 'respond',
  description: 'Answer a fixed JSON body with a fixed status (liveness probes, stubs).',
  options: optionsSchema,
  create(options, env) {
    const fill = (v: unknown): unknown => {
      if (typeof v === 'string')
        return v.replaceAll('{{version}}', env.service.version).replaceAll('{{service}}', env.service.name);
      if (Array.isArray(v)) return v.map(fill);
      if (v !== null && typeof v === 'object')
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]));
      return v;
    };
    const body = JSON.stringify(fill(options.body));
    return async (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      respond(ctx, body, { status: options.status, type: 'application/json' });
    };
  },
});
