/**
 * rate-limit: per-client request limits over a fixed window. Every response carries
 * `X-RateLimit-Limit/Remaining/Reset`; a client over the limit gets `rate_limited` (429 with
 * `retry_after_seconds` and `Retry-After`). Counters live in memory (one process) or in Redis
 * (shared exactly by every gateway process using the same Redis and prefix). See limiter.ts for
 * the Redis insurance fallback. The window is fixed per client: it starts with the client's first
 * request and `X-RateLimit-Reset` says when it ends. Memory counters start afresh on a hot reload;
 * Redis counters carry over (same prefix).
 *
 * The limiter is the stage's own (inline options) or a `rate-limiter` resource named by
 * `limiter:`, which other stages can then read (e.g. a tenant-info endpoint peeking at a caller's
 * count). `limit_from` takes the limit per request from the request state (a caller attribute
 * such as a tenant's requests per minute), `limit` (else the resource's limit) when absent.
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  type JsonSchema,
  stateFieldOf,
} from '../../runtime/index.ts';
import { compileKey, compileLimitPath } from './keys.ts';
import { createLimiter, type Limiter, rateLimitedError, rateLimitHeaders } from './limiter.ts';
import { limiterOptions, limiterProperties, limitOrLimiter } from './options.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  anyOf: limitOrLimiter,
  properties: {
    ...limiterProperties,
    limiter: {
      type: 'string',
      minLength: 1,
      'x-ref': 'resource',
      description:
        'A `rate-limiter` resource to count with (shared with other stages) instead of an inline limiter; ' +
        'window_seconds, backend, redis_url, prefix and insurance are then the resource’s',
    },
    limit_from: {
      type: 'string',
      pattern: '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z0-9_-]+)*$',
      description:
        'Dotted path in the request state giving the limit per request, e.g. ' +
        '`caller.attributes.requests_per_minute`; `limit` (else the limiter’s) applies when it is not a positive integer',
    },
    key: {
      type: 'string',
      pattern: "^(ip|caller|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$",
      description:
        'What identifies a client: `ip`, `caller` (the caller id set by an earlier stage, else the ip) or ' +
        '`header:<name>` (else the ip). Default: the caller id when authenticated, else the ip.',
    },
    headers: { type: 'boolean', default: true, description: 'Send X-RateLimit-* headers' },
    skip_paths: {
      type: 'array',
      items: { type: 'string' },
      default: ['/health'],
      description: 'Exact request paths never counted nor limited (health checks must not use the quota)',
    },
  },
} as const satisfies JsonSchema;
export type RateLimitOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<RateLimitOptions>({
  name: 'rate-limit',
  // A dry run asks what the checks decide, not whether the budget is there: it moves no counter.
  dryRun: 'skip',
  description: 'Per-client rate limiting (memory or Redis) with X-RateLimit-* headers and 429 rate_limited',
  // `key: caller` without a caller counts every client by its address; the default key falls back
  // to the address by design, so only the explicit choice is a need.
  needs: (o) => [...(o.key === 'caller' ? (['caller'] as const) : []), ...stateFieldOf(o.limit_from)],
  options: optionsSchema,
  async create(options, env) {
    let limiter: Limiter;
    let owned = false;
    if (options.limiter) {
      limiter = env.resource<Limiter>(options.limiter);
      if (typeof limiter?.consume !== 'function')
        throw new Error(`resource "${options.limiter}" is not a rate-limiter`);
    } else {
      if (options.limit === undefined) throw new Error('rate-limit needs `limit` or `limiter`');
      const config = { ...options, limit: options.limit };
      limiter = await createLimiter(limiterOptions(config, `switchyard:rl:${env.service.name}`, env.logger));
      owned = true;
    }
    const windowSeconds = limiter.windowSeconds;
    const fallbackLimit = options.limit ?? limiter.limit;
    const limitFrom = options.limit_from ? compileLimitPath(options.limit_from) : undefined;
    const clientOf = compileKey(options.key);
    // An inline limiter counts per route (as documented); a shared `limiter:` resource counts a
    // client across every route that names it (e.g. a tenant's requests per minute).
    const clientKey = options.limiter ? clientOf : (ctx: GatewayContext) => `${ctx.state.route}|${clientOf(ctx)}`;
    const skip = new Set(options.skip_paths);
    const sendHeaders = options.headers;
    const decisions = env.metrics.counter({
      name: 'switchyard_rate_limit_decisions_total',
      help: 'Rate-limit decisions, by decision (allowed|limited) and the store that answered',
      labelNames: ['decision', 'store'] as const,
    });

    return {
      async handle(ctx, next) {
        if (skip.has(ctx.path)) return next();
        const limit = limitFrom?.(ctx) ?? fallbackLimit;
        const result = await limiter.consume(clientKey(ctx), limit);
        decisions.inc({ decision: result.allowed ? 'allowed' : 'limited', store: result.store });
        // Set before next() so that the headers are on error responses from later stages too.
        if (sendHeaders) ctx.set(rateLimitHeaders(result));
        if (!result.allowed) {
          throw rateLimitedError(result, windowSeconds, sendHeaders);
        }
        await next();
      },
      health: () => limiter.health(),
      describe: () => ({
        limit: fallbackLimit,
        window_seconds: windowSeconds,
        backend: limiter.backend,
        ...(options.limiter ? { limiter: options.limiter } : {}),
        ...(options.limit_from ? { limit_from: options.limit_from } : {}),
      }),
      // A resource's limiter is closed by the resource, with the graph.
      close: owned ? () => limiter.close() : undefined,
    };
  },
});
