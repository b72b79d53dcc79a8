/**
 * readiness: a readiness probe over named checks (terminal stage). Each check reads a resource's
 * health or an upstream's reachability; the answer is 200 {status: ready, checks} when every
 * check is ok, else 503 {status: not_ready, checks}. Each check reports the status word of what
 * it reads (e.g. `loaded`, `loading`, `connected`), or the words the config gives it (an upstream
 * reported `reachable` / `unreachable`, say).
 */
import { definePlugin, type HealthReport } from '../../runtime/index.ts';

interface CheckSpec {
  resource?: string;
  upstream?: string;
  ok?: string;
  failed?: string;
}

interface ReadinessOptions {
  checks: Record<string, CheckSpec>;
  ready_status: string;
  not_ready_status: string;
}

export default definePlugin<ReadinessOptions>({
  name: 'readiness',
  description: 'Readiness probe over resource health and upstream reachability (200 ready / 503 not_ready).',
  options: {
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
    },
  },
  create(options, env) {
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
        if (!h.ok && h.error) errors[name] = h.error;
      }
      ctx.status = ready ? 200 : 503;
      ctx.body = {
        status: ready ? options.ready_status : options.not_ready_status,
        checks: out,
        ...(Object.keys(errors).length > 0 ? { errors } : {}),
      };
    };
  },
});
