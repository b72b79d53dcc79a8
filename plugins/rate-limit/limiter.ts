/**
 * A fixed-window counter per key, in memory or in Redis, with the answers a gateway needs
 * (remaining, reset time, retry-after). The rate-limit stage uses it; other plugins (per-tenant
 * limits) can create their own with a different limit and prefix.
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
  /** Counts one request for `key` and says whether it is within the limit. */
  consume(key: string): Promise<LimitResult>;
  /** The state of `key` without counting a request. */
  peek(key: string): Promise<LimitResult>;
  health(): HealthReport;
  close(): Promise<void>;
}

// Redis must answer quickly or the request falls back (or fails): a rate limit never hangs a request.
const redisCommandTimeoutMs = 1000;
const redisConnectTimeoutMs = 2000;

export async function createLimiter(options: LimiterOptions): Promise<Limiter> {
  const { limit, windowSeconds, prefix, logger } = options;
  const insurance = options.insurance ?? true;
  const memory = new RateLimiterMemory({ points: limit, duration: windowSeconds, keyPrefix: prefix });
  if (options.backend === 'memory') {
    return {
      limit,
      windowSeconds,
      backend: 'memory',
      consume: (key) => run(memory, 'consume', safeKey(key), limit, windowSeconds, 'memory'),
      peek: (key) => run(memory, 'get', safeKey(key), limit, windowSeconds, 'memory'),
      health: () => ({ ok: true, status: 'memory' }),
      close: async () => {},
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
    points: limit,
    duration: windowSeconds,
    keyPrefix: prefix,
    rejectIfRedisNotReady: true,
  });

  let fallingBack = false;
  async function withFallback(op: 'consume' | 'get', key: string): Promise<LimitResult> {
    const k = safeKey(key);
    try {
      const result = await run(redis, op, k, limit, windowSeconds, 'redis');
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
      return run(memory, op, k, limit, windowSeconds, 'memory-fallback');
    }
  }

  return {
    limit,
    windowSeconds,
    backend: 'redis',
    consume: (key) => withFallback('consume', key),
    peek: (key) => withFallback('get', key),
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
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}

/** Runs one limiter operation; a rejection carrying a RateLimiterRes is "over the limit", not a failure. */
async function run(
  limiter: RateLimiterMemory | RateLimiterRedis,
  op: 'consume' | 'get',
  key: string,
  limit: number,
  windowSeconds: number,
  store: LimitResult['store'],
): Promise<LimitResult> {
  let res: RateLimiterRes | null;
  let allowed = true;
  try {
    res = op === 'consume' ? await limiter.consume(key) : await limiter.get(key);
  } catch (err) {
    if (!(err instanceof RateLimiterRes)) throw err;
    res = err;
    allowed = false;
  }
  const now = Date.now();
  // No record yet (peek on a fresh key): a full window ahead.
  const msLeft = res && res.msBeforeNext >= 0 ? res.msBeforeNext : windowSeconds * 1000;
  const remaining = res ? Math.max(limit - res.consumedPoints, 0) : limit;
  return {
    allowed,
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
