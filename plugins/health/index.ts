/**
 * health: answers the typed-proxy health object (terminal stage).
 * 200 {status: healthy, upstream: connected, uptime_seconds, version} while the named upstream
 * is reachable; 503 {status: unhealthy, upstream: disconnected, error} when it is not. Without
 * an upstream it reports the process itself: healthy, with uptime and version. The answer is
 * public: it says why an upstream is down, never where (no URL, address or host:port).
 */
import {
  definePlugin,
  type FromSchema,
  type JsonSchema,
  publicReason,
  respond,
  type Upstream,
} from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    upstream: {
      type: 'string',
      'x-ref': 'upstream',
      description:
        'Upstream whose reachability decides healthy / unhealthy (several endpoints: healthy while one ' +
        'takes requests; `endpoints` counts them by state).',
    },
    include_uptime: { type: 'boolean', default: true, description: 'Add uptime_seconds to a healthy answer.' },
  },
} as const satisfies JsonSchema;
type HealthOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<HealthOptions>({
  name: 'health',
  description: "Report the service's health and, when named, its upstream's (200 healthy / 503 unhealthy).",
  options: optionsSchema,
  create(options, env) {
    const upstream: Upstream | undefined = options.upstream ? env.upstream(options.upstream) : undefined;
    const started = env.service.startedAt.getTime();

    return async (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      const h = upstream?.health();
      const endpoints = endpointCounts(h?.detail?.endpoints);
      if (h && !h.connected) {
        respond(
          ctx,
          {
            status: 'unhealthy',
            upstream: 'disconnected',
            // Why, never where: no URL or address on this unauthenticated answer (admin health has them).
            error: publicReason(h.error ?? 'upstream unreachable'),
            ...(endpoints ? { endpoints } : {}),
          },
          { status: 503 },
        );
        return;
      }
      respond(ctx, {
        status: 'healthy',
        ...(upstream ? { upstream: 'connected' } : {}),
        ...(options.include_uptime ? { uptime_seconds: Math.floor((Date.now() - started) / 1000) } : {}),
        version: env.service.version,
        // An upstream that keeps client sessions (stdio MCP): how many are live, of how many allowed.
        ...(h?.sessions ? { sessions: h.sessions } : {}),
        // Several endpoints: how many take requests (counts only; their URLs stay on the admin listener).
        ...(endpoints ? { endpoints } : {}),
      });
    };
  },
});

/** A balanced upstream's endpoints counted by state (up, down by their check or connect, ejected). */
function endpointCounts(list: unknown): Record<string, number> | undefined {
  if (!Array.isArray(list)) return undefined;
  const counts: Record<string, number> = { total: list.length, up: 0, down: 0, ejected: 0 };
  for (const e of list as Array<{ state?: string }>) {
    if (e.state && e.state in counts) counts[e.state] = (counts[e.state] as number) + 1;
  }
  return counts;
}
