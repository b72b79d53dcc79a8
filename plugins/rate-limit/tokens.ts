/**
 * Token budgets per key over a fixed window, in memory or in Redis: the store behind the
 * `token-limit` stage. Unlike a request counter, a request here takes many points at once and
 * the number is known only roughly when it starts, so a request *reserves* an estimate and later
 * *settles* it with what the answer says it used.
 *
 * - reserve(key, points, limit): takes `points` only when they fit (`used + points <= limit`);
 *   a refused reservation takes nothing (a client sending large requests is not locked out by
 *   its own refusals). Atomic: in Redis a Lua script checks and adds in one step, so several
 *   gateway processes sharing a Redis never admit more than the limit between them.
 * - settle(reservation, actual): replaces the reservation by `actual` in the window it was made
 *   in (refunds the difference, or charges more; never below 0). When that window has ended
 *   since, its count went with it: only what `actual` exceeds the reservation by is charged, to
 *   the current window (started if there is none), so an answer larger than its estimate always
 *   counts somewhere.
 *
 * A window is a hash `{u: used, s: window id}` that expires with the window; the id (random,
 * from the process that opened the window) tells a settle whether its window is still the one
 * running. Keys: `<prefix>:<key>`. Insurance as in limiter.ts: when Redis fails, the memory store
 * answers (per process) and the switch is logged.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { sha256Hex } from '../../runtime/index.ts';

export interface TokenState {
  limit: number;
  /** Tokens counted in the current window (reservations included). */
  used: number;
  remaining: number;
  /** Unix time (seconds) at which the current window ends. */
  resetAt: number;
  /** Milliseconds until the window ends (a full window when there is none yet). */
  msLeft: number;
  store: 'memory' | 'redis' | 'memory-fallback';
}

export interface Reservation {
  key: string;
  points: number;
  /** Id of the window the points were taken in. */
  window: string;
  store: TokenState['store'];
}

export interface ReserveResult extends TokenState {
  allowed: boolean;
  /** Present when allowed: what settle() needs. */
  reservation?: Reservation;
}

export interface TokenCounter {
  readonly windowSeconds: number;
  reserve(key: string, points: number, limit: number): Promise<ReserveResult>;
  settle(reservation: Reservation, actual: number, limit: number): Promise<TokenState>;
  peek(key: string, limit: number): Promise<TokenState>;
  close(): void;
}

export interface TokenCounterOptions {
  windowSeconds: number;
  prefix: string;
  /** A connected (or connecting) client: Redis store; undefined: memory store. */
  redis?: Redis;
  insurance: boolean;
  logger: Logger;
  /** For logs only. */
  redisLabel?: string;
}

/** KEYS[1] key; ARGV points, limit, window ms, id for a new window. Returns {ok, used, pttl, id}. */
const reserveScript = `
local used = tonumber(redis.call('HGET', KEYS[1], 'u'))
local id = redis.call('HGET', KEYS[1], 's')
if not used or not id then
  used = 0
  id = ARGV[4]
  redis.call('HSET', KEYS[1], 'u', 0, 's', id)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
local ok = 0
if used + tonumber(ARGV[1]) <= tonumber(ARGV[2]) then
  used = redis.call('HINCRBY', KEYS[1], 'u', ARGV[1])
  ok = 1
end
return {ok, used, redis.call('PTTL', KEYS[1]), id}
`;

/**
 * KEYS[1] key; ARGV window id of the reservation, delta in that window (actual - reserved),
 * charge otherwise (max(delta, 0)), window ms, id for a new window. Returns {used, pttl}.
 */
const settleScript = `
local id = redis.call('HGET', KEYS[1], 's')
local delta = tonumber(ARGV[3])
if id == ARGV[1] then delta = tonumber(ARGV[2]) end
if not id then
  if delta <= 0 then return {0, -2} end
  redis.call('HSET', KEYS[1], 'u', 0, 's', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
local used = tonumber(redis.call('HGET', KEYS[1], 'u')) or 0
if delta ~= 0 then
  if used + delta < 0 then delta = -used end
  used = redis.call('HINCRBY', KEYS[1], 'u', delta)
end
return {used, redis.call('PTTL', KEYS[1])}
`;

type ScriptClient = Redis & {
  switchyardTokenReserve(key: string, points: number, limit: number, windowMs: number, id: string): Promise<unknown>;
  switchyardTokenSettle(
    key: string,
    window: string,
    delta: number,
    charge: number,
    windowMs: number,
    id: string,
  ): Promise<unknown>;
};

export function createTokenCounter(options: TokenCounterOptions): TokenCounter {
  const { windowSeconds, prefix, logger } = options;
  const windowMs = windowSeconds * 1000;
  const memory = new MemoryWindows(windowMs);
  // Client-chosen keys (a header value) can be long: hashed, as limiter.ts does.
  const storeKey = (key: string) => `${prefix}:${key.length <= 200 ? key : `sha256:${sha256Hex(key)}`}`;
  const redis = options.redis as ScriptClient | undefined;
  if (!redis) {
    return {
      windowSeconds,
      reserve: async (key, points, limit) => memory.reserve(storeKey(key), key, points, limit, 'memory'),
      settle: async (r, actual, limit) => memory.settle(storeKey(r.key), r, actual, limit, 'memory'),
      peek: async (key, limit) => memory.peek(storeKey(key), limit, 'memory'),
      close: () => memory.close(),
    };
  }
  // defineCommand: EVALSHA, falling back to EVAL once per connection when the script is not cached.
  if (typeof redis.switchyardTokenReserve !== 'function') {
    redis.defineCommand('switchyardTokenReserve', { numberOfKeys: 1, lua: reserveScript });
    redis.defineCommand('switchyardTokenSettle', { numberOfKeys: 1, lua: settleScript });
  }
  let fallingBack = false;
  async function withFallback<T>(onRedis: () => Promise<T>, onMemory: () => T): Promise<T> {
    try {
      const result = await onRedis();
      if (fallingBack) {
        fallingBack = false;
        logger.info({ redis: options.redisLabel }, 'token limit: Redis is back; shared counting resumed');
      }
      return result;
    } catch (err) {
      if (!options.insurance) throw err;
      if (!fallingBack) {
        fallingBack = true;
        logger.warn(
          { redis: options.redisLabel, err: (err as Error).message },
          'token limit: Redis failed; counting in memory (per process) until it is back',
        );
      }
      return onMemory();
    }
  }

  return {
    windowSeconds,
    reserve(key, points, limit) {
      const k = storeKey(key);
      return withFallback<ReserveResult>(
        async () => {
          const [ok, used, pttl, id] = (await redis.switchyardTokenReserve(
            k,
            points,
            limit,
            windowMs,
            randomUUID(),
          )) as [number, number, number, string];
          const state = stateOf(limit, Number(used), Number(pttl), windowMs, 'redis');
          return ok === 1
            ? { ...state, allowed: true, reservation: { key, points, window: String(id), store: 'redis' as const } }
            : { ...state, allowed: false };
        },
        () => memory.reserve(k, key, points, limit, 'memory-fallback'),
      );
    },
    settle(r, actual, limit) {
      const k = storeKey(r.key);
      const delta = actual - r.points;
      // A reservation made in memory (Redis was down) is settled there: Redis never counted it.
      if (r.store !== 'redis') return Promise.resolve(memory.settle(k, r, actual, limit, r.store));
      return withFallback(
        async () => {
          const [used, pttl] = (await redis.switchyardTokenSettle(
            k,
            r.window,
            delta,
            Math.max(delta, 0),
            windowMs,
            randomUUID(),
          )) as [number, number];
          return stateOf(limit, Number(used), Number(pttl), windowMs, 'redis');
        },
        () => memory.settle(k, r, actual, limit, 'memory-fallback'),
      );
    },
    peek(key, limit) {
      const k = storeKey(key);
      return withFallback(
        async () => {
          const [used, pttl] = (await redis.multi().hget(k, 'u').pttl(k).exec()) ?? [];
          if (used?.[0] || pttl?.[0]) throw used?.[0] ?? pttl?.[0];
          return stateOf(limit, Number(used?.[1] ?? 0), Number(pttl?.[1] ?? -2), windowMs, 'redis');
        },
        () => memory.peek(k, limit, 'memory-fallback'),
      );
    },
    close: () => memory.close(),
  };
}

function stateOf(limit: number, used: number, pttl: number, windowMs: number, store: TokenState['store']): TokenState {
  // No window (pttl -2) or none set: a full window ahead.
  const msLeft = pttl > 0 ? pttl : windowMs;
  return {
    limit,
    used,
    remaining: Math.max(limit - used, 0),
    resetAt: Math.ceil((Date.now() + msLeft) / 1000),
    msLeft,
    store,
  };
}

interface MemoryWindow {
  used: number;
  id: string;
  endsAt: number;
}

/** The memory store: one window per key, dropped when it ends (swept once a window). */
class MemoryWindows {
  readonly #windows = new Map<string, MemoryWindow>();
  readonly #sweep: NodeJS.Timeout;

  constructor(private readonly windowMs: number) {
    this.#sweep = setInterval(() => {
      const now = Date.now();
      for (const [k, w] of this.#windows) if (w.endsAt <= now) this.#windows.delete(k);
    }, windowMs);
    this.#sweep.unref();
  }

  #current(k: string, open: boolean): MemoryWindow | undefined {
    const now = Date.now();
    let w = this.#windows.get(k);
    if (w && w.endsAt <= now) {
      this.#windows.delete(k);
      w = undefined;
    }
    if (!w && open) {
      w = { used: 0, id: randomUUID(), endsAt: now + this.windowMs };
      this.#windows.set(k, w);
    }
    return w;
  }

  #state(w: MemoryWindow | undefined, limit: number, store: TokenState['store']): TokenState {
    return stateOf(limit, w?.used ?? 0, w ? w.endsAt - Date.now() : -2, this.windowMs, store);
  }

  reserve(k: string, key: string, points: number, limit: number, store: TokenState['store']): ReserveResult {
    const w = this.#current(k, true) as MemoryWindow;
    if (w.used + points > limit) return { ...this.#state(w, limit, store), allowed: false };
    w.used += points;
    return { ...this.#state(w, limit, store), allowed: true, reservation: { key, points, window: w.id, store } };
  }

  settle(k: string, r: Reservation, actual: number, limit: number, store: TokenState['store']): TokenState {
    const delta = actual - r.points;
    let w = this.#current(k, false);
    const sameWindow = w !== undefined && w.id === r.window;
    const change = sameWindow ? delta : Math.max(delta, 0);
    if (change > 0 && !w) w = this.#current(k, true);
    if (w && change !== 0) w.used = Math.max(w.used + change, 0);
    return this.#state(w, limit, store);
  }

  peek(k: string, limit: number, store: TokenState['store']): TokenState {
    return this.#state(this.#current(k, false), limit, store);
  }

  close(): void {
    clearInterval(this.#sweep);
  }
}
