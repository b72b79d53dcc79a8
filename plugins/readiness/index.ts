/**
 * readiness: a readiness probe over named checks (terminal stage). Each check reads a resource's
 * health or an upstream's reachability; the answer is 200 {status: ready, checks} when every
 * check is ok, else 503 {status: not_ready, checks}. Each check reports the status word of what
 * it reads (e.g. `loaded`, `loading`, `connected`), or the words the config gives it (an upstream
 * reported `reachable` / `unreachable`, say). `flat: true` writes each check's word at the top
 * level instead (`{status, storage: "ok"}`); `connections: true` adds the number of open client
 * connections of the service.
 */
import {
  definePlugin,
  type FromSchema,
  type HealthReport,
  type JsonSchema,
  publicReason,
  respond,
} from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['checks'],
  properties: {
    checks: {
      type: 'object',
      description: 'Check name → {resource} or {upstream}, with optional `ok` / `failed` status words.',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: {
          resource: { type: 'string', minLength: 1, 'x-ref': 'resource' },
          upstream: { type: 'string', minLength: 1, 'x-ref': 'upstream' },
          ok: { type: 'string', minLength: 1, description: 'Status word when ok (default: the reported one).' },
          failed: {
            type: 'string',
            minLength: 1,
            description: 'Status word when not ok (default: the reported one).',
          },
        },
        oneOf: [
          { required: ['resource'], properties: { resource: true } },
          { required: ['upstream'], properties: { upstream: true } },
        ],
      },
    },
    ready_status: { type: 'string', default: 'ready' },
    not_ready_status: { type: 'string', default: 'not_ready' },
    flat: {
      type: 'boolean',
      default: false,
      description: "Write each check's status word at the top level of the body instead of under `checks`.",
    },
    connections: {
      type: 'boolean',
      default: false,
      description: 'Add `connections`: client connections currently open on the service (0 when not known).',
    },
  },
} as const satisfies JsonSchema;
type ReadinessOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ReadinessOptions>({
  name: 'readiness',
  description: 'Readiness probe over resource health and upstream reachability (200 ready / 503 not_ready).',
  options: optionsSchema,
  create(options, env) {
    const taken = ['status', 'errors', ...(options.connections ? ['connections'] : [])];
    const clash = options.flat ? Object.keys(options.checks).find((name) => taken.includes(name)) : undefined;
    if (clash) throw new Error(`readiness: with flat: true, a check cannot be named "${clash}"`);
    const checks = Object.entries(options.checks).map(([name, spec]) => {
      const upstream = spec.upstream ? env.upstream(spec.upstream) : undefined;
      const read = async (): Promise<HealthReport> => {
        if (upstream) {
          const h = upstream.health();
          return { ok: h.connected, status: h.connected ? 'connected' : 'disconnected', error: h.error };
        }
        return (await env.resourceHealth(spec.resource as string)) ?? { ok: true, status: 'ok' };
      };
      return { name, spec, read };
    });

    // Open client connections of the main listener (of this worker, in cluster mode).
    const connectionCount = () => env.service.connections?.().active ?? 0;

    return async (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      const out: Record<string, string> = {};
      const errors: Record<string, string> = {};
      let ready = true;
      for (const { name, spec, read } of checks) {
        let h: HealthReport;
        try {
          h = await read();
        } catch (err) {
          h = { ok: false, status: 'error', error: (err as Error).message };
        }
        ready &&= h.ok;
        out[name] = (h.ok ? spec.ok : spec.failed) ?? h.status;
        // A public answer: why, never where (no URL, address or host:port of a backend or database).
        if (!h.ok && h.error) errors[name] = publicReason(h.error);
      }
      respond(
        ctx,
        {
          status: ready ? options.ready_status : options.not_ready_status,
          ...(options.flat ? out : { checks: out }),
          ...(options.connections ? { connections: connectionCount() } : {}),
          ...(Object.keys(errors).length > 0 ? { errors } : {}),
        },
        { status: ready ? 200 : 503 },
      );
    };
  },
});
