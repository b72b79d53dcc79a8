/**
 * A fixed-window counter per key, in memory or in Redis, with the answers a gateway needs
 * (remaining, reset time, retry-after). The rate-limit stage uses it; other plugins (per-tenant
 * limits) can create their own with a different limit and prefix, or share one through the
 * `rate-limiter` resource.
 *
 * Per-call limits: the store only counts (one counter per key, whatever the limit); the limit is
 * compared with that count on each call. So `consume(key, limit)` may be given a different limit
 * per key (a tenant's requests per minute) and the count stays exact across processes sharing a
 * Redis: the count is atomic there, and every process compares it with the same limit. A changed
 * limit applies at once to the running window.
 *
 * Redis: rate-limiter-flexible increments and sets the expiry in one Lua script, so several
 * gateway processes sharing a Redis share one limit exactly (no double counting, no lost counts).
 * Insurance: when Redis fails or is unreachable, an in-memory limiter with the same limit answers
 * instead (each process then counts on its own) and the switch is logged, until Redis is back.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { GatewayError, type HealthReport, sha256Hex } from '../../runtime/index.ts';
import { createTokenCounter, type TokenCounter } from './tokens.ts';

export interface LimiterOptions {
  limit: number;
  windowSeconds: number;
  backend: 'memory' | 'redis';
  redisUrl?: string;
  /** Key prefix; limiters sharing a prefix and a Redis share their counters. */
  prefix: string;
  /** Fall back to memory when Redis fails (default true). */
  insurance?: boolean;
  logger: Logger;
}

export interface LimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix time (seconds) at which the current window ends. */
  resetAt: number;
  /** Whole seconds to wait before retrying (≥ 1), meaningful when not allowed. */
  retryAfterSeconds: number;
  /** Which store answered: `memory`, `redis`, or `memory-fallback` (Redis failed). */
  store: 'memory' | 'redis' | 'memory-fallback';
}

export interface Limiter {
  readonly limit: number;
  readonly windowSeconds: number;
  readonly backend: 'memory' | 'redis';
  /**
   * Counts one request for `key` and says whether it is within `limit` (default: the limiter's
   * own). Requests refused are counted too, as in any fixed window.
   */
  consume(key: string, limit?: number): Promise<LimitResult>;
  /** The state of `key` against `limit` (default: the limiter's own) without counting a request. */
  peek(key: string, limit?: number): Promise<LimitResult>;
  /**
   * Token budgets over the same window and store (same Redis connection), under
   * `<prefix>:tokens`: what the `token-limit` stage reserves and settles (tokens.ts).
   */
  readonly tokens: TokenCounter;
  health(): HealthReport;
  close(): Promise<void>;
}

/**
 * The stores only count: the limit is compared here, per call. Given a limit of their own,
 * rate-limiter-flexible's limiters answer every request past it with a rejected promise, which
 * costs several times a resolved one on a busy key.
 */
const countOnly = Number.MAX_SAFE_INTEGER;

// Redis must answer quickly or the request falls back (or fails): a rate limit never hangs a request.
const redisCommandTimeoutMs = 1000;
const redisConnectTimeoutMs = 2000;

export async function createLimiter(options: LimiterOptions): Promise<Limiter> {
  const { limit, windowSeconds, prefix, logger } = options;
  // not the schema default: the limiter's own, for limiters made outside a stage's options (tests)
  const insurance = options.insurance ?? true;
  const memory = new RateLimiterMemory({ points: countOnly, duration: windowSeconds, keyPrefix: prefix });
  const tokenPrefix = `${prefix}:tokens`;
  if (options.backend === 'memory') {
    const tokens = createTokenCounter({ windowSeconds, prefix: tokenPrefix, insurance, logger });
    return {
      limit,
      windowSeconds,
      backend: 'memory',
      consume: (key, max = limit) => run(memory, 'consume', safeKey(key), max, windowSeconds, 'memory'),
      peek: (key, max = limit) => run(memory, 'get', safeKey(key), max, windowSeconds, 'memory'),
      tokens,
      health: () => ({ ok: true, status: 'memory' }),
      close: async () => tokens.close(),
    };
  }

  const redisUrl = options.redisUrl ?? 'redis://127.0.0.1:6379';
  const client = new Redis(redisUrl, {
    lazyConnect: true,
    // Fail fast while disconnected instead of queueing: the fallback (or the error) answers at once.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: redisCommandTimeoutMs,
    connectTimeout: redisConnectTimeoutMs,
  });
  let lastError: string | undefined;
  client.on('error', (err: Error) => {
    // ioredis reconnects by itself; log each distinct error once rather than on every retry.
    if (err.message !== lastError) logger.warn({ err: err.message, redis: redactUrl(redisUrl) }, 'redis error');
    lastError = err.message;
  });
  client.on('ready', () => {
    lastError = undefined;
  });
  try {
    await client.connect();
  } catch (err) {
    if (!insurance) {
      client.disconnect();
      throw new Error(`rate limit: cannot connect to Redis at ${redactUrl(redisUrl)}: ${(err as Error).message}`);
    }
    logger.warn(
      { redis: redactUrl(redisUrl), err: (err as Error).message },
      'rate limit: Redis unreachable at start; counting in memory until it connects',
    );
  }
  const redis = new RateLimiterRedis({
    storeClient: client,
    points: countOnly,
    duration: windowSeconds,
    keyPrefix: prefix,
    rejectIfRedisNotReady: true,
  });

  const tokens = createTokenCounter({
    windowSeconds,
    prefix: tokenPrefix,
    redis: client,
    insurance,
    logger,
    redisLabel: redactUrl(redisUrl),
  });

  let fallingBack = false;
  async function withFallback(op: 'consume' | 'get', key: string, max: number): Promise<LimitResult> {
    const k = safeKey(key);
    try {
      const result = await run(redis, op, k, max, windowSeconds, 'redis');
      if (fallingBack) {
        fallingBack = false;
        logger.info({ redis: redactUrl(redisUrl) }, 'rate limit: Redis is back; shared counting resumed');
      }
      return result;
    } catch (err) {
      if (!insurance) throw err;
      if (!fallingBack) {
        fallingBack = true;
        logger.warn(
          { redis: redactUrl(redisUrl), err: (err as Error).message },
          'rate limit: Redis failed; counting in memory (per process) until it is back',
        );
      }
      return run(memory, op, k, max, windowSeconds, 'memory-fallback');
    }
  }

  return {
    limit,
    windowSeconds,
    backend: 'redis',
    consume: (key, max = limit) => withFallback('consume', key, max),
    peek: (key, max = limit) => withFallback('get', key, max),
    tokens,
    health() {
      if (client.status === 'ready') return { ok: true, status: 'connected' };
      // With insurance the stage still answers (per-process counts), so it is degraded, not down.
      return {
        ok: insurance,
        status: insurance ? 'fallback-memory' : 'disconnected',
        error: lastError ?? `redis ${client.status}`,
      };
    },
    async close() {
      tokens.close();
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}

/**
 * Runs one limiter operation and compares the count with `limit`. rate-limiter-flexible would
 * reject with a RateLimiterRes past its own `points` (never reached: see countOnly); that would be
 * a count too, not a failure. The decision is taken here against the limit of this call.
 */
async function run(
  limiter: RateLimiterMemory | RateLimiterRedis,
  op: 'consume' | 'get',
  key: string,
  limit: number,
  windowSeconds: number,
  store: LimitResult['store'],
): Promise<LimitResult> {
  let res: RateLimiterRes | null;
  try {
    res = op === 'consume' ? await limiter.consume(key) : await limiter.get(key);
  } catch (err) {
    if (!(err instanceof RateLimiterRes)) throw err;
    res = err;
  }
  const now = Date.now();
  const consumed = res?.consumedPoints ?? 0;
  // No record yet (peek on a fresh key): a full window ahead.
  const msLeft = res && res.msBeforeNext >= 0 ? res.msBeforeNext : windowSeconds * 1000;
  const remaining = Math.max(limit - consumed, 0);
  return {
    allowed: consumed <= limit,
    limit,
    remaining,
    resetAt: Math.ceil((now + msLeft) / 1000),
    retryAfterSeconds: Math.max(1, Math.ceil(msLeft / 1000)),
    store,
  };
}

/** Header values and other client-chosen keys can be long; hash those to keep store keys bounded. */
function safeKey(key: string): string {
  return key.length <= 200 ? key : `sha256:${sha256Hex(key)}`;
}

function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/** The `X-RateLimit-*` headers for a result. */
export function rateLimitHeaders(result: LimitResult): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(result.limit),
    'X-RateLimit-Remaining': String(result.remaining),
    'X-RateLimit-Reset': String(result.resetAt),
  };
}

/**
 * The typed 429 for a result over the limit; the route's dialect writes it. The X-RateLimit-*
 * headers ride on the error too, so they survive an error handler that resets response headers.
 */
export function rateLimitedError(result: LimitResult, windowSeconds: number, withHeaders = true): GatewayError {
  const retryAfter = { 'Retry-After': String(result.retryAfterSeconds) };
  return new GatewayError('rate_limited', `Rate limit exceeded: ${result.limit} requests per ${windowSeconds}s`, {
    details: { limit: result.limit, window_seconds: windowSeconds, reset: result.resetAt },
    extra: { retry_after_seconds: result.retryAfterSeconds },
    headers: withHeaders ? { ...retryAfter, ...rateLimitHeaders(result) } : retryAfter,
  });
}
