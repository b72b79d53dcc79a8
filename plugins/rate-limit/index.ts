/**
 * rate-limit: per-client request limits over a fixed window. Every response carries
 * `X-RateLimit-Limit/Remaining/Reset`; a client over the limit gets `rate_limited` (429 with
 * `retry_after_seconds` and `Retry-After`). Counters live in memory (one process) or in Redis
 * (shared exactly by every gateway process using the same Redis and prefix). See limiter.ts for
 * the Redis insurance fallback. The window is fixed per client: it starts with the client's first
 * request and `X-RateLimit-Reset` says when it ends. Memory counters start afresh on a hot reload;
 * Redis counters carry over (same prefix).
 */
import { definePlugin, type GatewayContext } from '../../runtime/index.ts';
import { createLimiter, rateLimitedError, rateLimitHeaders } from './limiter.ts';

export interface RateLimitOptions {
  limit: number;
  window_seconds: number;
  key?: string;
  backend: 'memory' | 'redis';
  redis_url: string;
  prefix?: string;
  insurance: boolean;
  headers: boolean;
}

export default definePlugin<RateLimitOptions>({
  name: 'rate-limit',
  description: 'Per-client rate limiting (memory or Redis) with X-RateLimit-* headers and 429 rate_limited',
  options: {
    type: 'object',
    additionalProperties: false,
    required: ['limit'],
    properties: {
      limit: { type: 'integer', minimum: 1, description: 'Requests allowed per window and client' },
      window_seconds: { type: 'integer', minimum: 1, default: 60 },
      key: {
        type: 'string',
        pattern: "^(ip|caller|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$",
        description:
          'What identifies a client: `ip`, `caller` (the caller id set by an earlier stage, else the ip) or ' +
          '`header:<name>` (else the ip). Default: the caller id when authenticated, else the ip.',
      },
      backend: { enum: ['memory', 'redis'], default: 'memory' },
      redis_url: { type: 'string', default: 'redis://127.0.0.1:6379' },
      prefix: {
        type: 'string',
        minLength: 1,
        description: 'Store key prefix (default `switchyard:rl:<service>`); stages sharing it share counters',
      },
      insurance: {
        type: 'boolean',
        default: true,
        description: 'On Redis failure count in memory per process (logged) instead of failing the stage',
      },
      headers: { type: 'boolean', default: true, description: 'Send X-RateLimit-* headers' },
    },
  },
  async create(options, env) {
    const windowSeconds = options.window_seconds ?? 60;
    const backend = options.backend ?? 'memory';
    const limiter = await createLimiter({
      limit: options.limit,
      windowSeconds,
      backend,
      redisUrl: options.redis_url,
      prefix: options.prefix ?? `switchyard:rl:${env.service.name}`,
      insurance: options.insurance ?? true,
      logger: env.logger,
    });
    const clientKey = compileKey(options.key);
    const sendHeaders = options.headers ?? true;
    const decisions = env.metrics.counter({
      name: 'switchyard_rate_limit_decisions_total',
      help: 'Rate-limit decisions, by decision (allowed|limited) and the store that answered',
      labelNames: ['decision', 'store'] as const,
    });

    return {
      async handle(ctx, next) {
        const result = await limiter.consume(clientKey(ctx));
        decisions.inc({ decision: result.allowed ? 'allowed' : 'limited', store: result.store });
        // Set before next() so that the headers are on error responses from later stages too.
        if (sendHeaders) ctx.set(rateLimitHeaders(result));
        if (!result.allowed) {
          throw rateLimitedError(result, windowSeconds, sendHeaders);
        }
        await next();
      },
      health: () => limiter.health(),
      describe: () => ({ limit: options.limit, window_seconds: windowSeconds, backend }),
      close: () => limiter.close(),
    };
  },
});

/** Builds the function that names the client of a request; keys are namespaced so that kinds never collide. */
function compileKey(spec: string | undefined): (ctx: GatewayContext) => string {
  const ip = (ctx: GatewayContext) => `ip:${ctx.ip}`;
  if (spec === 'ip') return ip;
  if (spec === 'caller') return (ctx) => (ctx.state.caller ? `caller:${ctx.state.caller.id}` : ip(ctx));
  if (spec?.startsWith('header:')) {
    const name = spec.slice('header:'.length);
    return (ctx) => {
      const value = ctx.get(name);
      return value ? `header:${value}` : ip(ctx);
    };
  }
  return (ctx) => (ctx.state.caller?.authenticated ? `caller:${ctx.state.caller.id}` : ip(ctx));
}
