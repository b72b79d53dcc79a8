/**
 * Token budgets per key over a fixed window, in memory or in Redis: the store behind the
 * `token-limit` stage. Unlike a request counter, a request here takes many points at once and
 * the number is known only roughly when it starts, so a request *reserves* an estimate and later
 * *settles* it with what the answer says it used.
 *
 * - reserve(key, points, limit): takes `points` only when they fit (`used + points <= limit`);
 *   a refused reservation takes nothing (a client sending large requests is not locked out by
 *   its own refusals). With a `minimum`, `points` is the most wanted: the reservation takes what
 *   is left of the window up to `points`, refused when that is under `minimum` (a request whose
 *   cap the stage chooses). Atomic: in Redis a Lua script checks and adds in one step, so
 *   several gateway processes sharing a Redis never admit more than the limit between them.
 * - settle(reservation, actual): replaces the reservation by `actual` in the window it was made
 *   in (refunds the difference, or charges more; never below 0). When that window has ended
 *   since, only what `actual` exceeds the reservation by is charged, to the current window
 *   (started if there is none), so an answer larger than its estimate always counts somewhere;
 *   a refund then only takes back debt that window carried over (below).
 *
 * Debt: a window that ends with more used than its limit (answers larger than their
 * reservations) carries the excess into the next window, which starts with it already used; each
 * whole window that passes without a request pays off one limit of it. So over any run of
 * windows a key is served at most its limit per window plus what its last answers overshot by:
 * a client cannot take 20,000 tokens in a 3,000-token window and start the next one fresh.
 *
 * A window is a hash `{u: used, s: window id, e: end (ms, Redis clock), l: limit last given,
 * p: the previous window's id, c: debt carried from it, not yet refunded}`. The window rolls over
 * lazily, in the script of the next request after `e` (the Redis clock, one for every process);
 * the key expires one window after `e`, and later still while it carries debt (one more window
 * per limit of debt). The id (random, from the process that opened the window) tells a settle
 * whether its window is still the one running, or the one before. Keys: `<prefix>:<key>`.
 * Insurance as in limiter.ts: when Redis fails, the memory store answers (per process) and the
 * switch is logged.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { sha256Hex } from '../../runtime/index.ts';

export interface TokenState {
  limit: number;
  /** Tokens counted in the current window (reservations and debt carried in included); above `limit` in debt. */
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
  /** What the reservation took (with a `minimum`: between it and the points asked). */
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
  /**
   * Takes `points` when they fit. With `minimum` (at most `points`): takes what is left of the
   * window up to `points`, and refuses only when that is less than `minimum`.
   */
  reserve(key: string, points: number, limit: number, minimum?: number): Promise<ReserveResult>;
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

/**
 * What every script starts with: the Redis clock (`now`, ms), and `load(key)`, the key's window
 * as of now, rolled over (debt carried) when it has ended; nil when there is none. `save` writes a
 * window back and sets the key's expiry (one window past its end, more while it is in debt).
 * ARGV[1] is the window length in ms in every script.
 */
const prelude = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local W = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function load(key)
  local h = redis.call('HMGET', key, 'u', 's', 'e', 'l', 'p', 'c')
  local used, id, ends, lim = tonumber(h[1]), h[2], tonumber(h[3]), tonumber(h[4])
  if not used or not id then return nil end
  if not ends then
    -- a window written without an end (an older version): it ends with its key
    ends = now + math.max(redis.call('PTTL', key), 0)
  end
  if now < ends then
    return {used = used, id = id, ends = ends, prev = h[5] or false, carried = tonumber(h[6]) or 0, rolled = false}
  end
  local carry = 0
  if lim then carry = math.max(used - lim * (1 + math.floor((now - ends) / W)), 0) end
  return {used = carry, id = false, ends = now + W, prev = id, carried = carry, rolled = true}
end
local function fresh()
  return {used = 0, id = false, ends = now + W, prev = false, carried = 0, rolled = true}
end
local function save(key, w, limit)
  redis.call('HSET', key, 'u', w.used, 's', w.id, 'e', w.ends, 'l', limit)
  if w.prev then redis.call('HSET', key, 'p', w.prev, 'c', w.carried) else redis.call('HDEL', key, 'p', 'c') end
  local debt = math.max(w.used - limit, 0)
  redis.call('PEXPIRE', key, (w.ends - now) + W * (1 + math.ceil(debt / limit)))
end
`;

/** KEYS[1] key; ARGV window ms, points, minimum, limit, id for a new window. Returns {ok, taken, used, ms left, id}. */
const reserveScript = `${prelude}
local points, minimum, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local w = load(KEYS[1]) or fresh()
if w.rolled then w.id = ARGV[5] end
local take = math.min(points, limit - w.used)
local ok = 0
if take >= minimum then
  ok = 1
  w.used = w.used + take
else
  take = 0
end
save(KEYS[1], w, limit)
return {ok, take, w.used, w.ends - now, w.id}
`;

/**
 * KEYS[1] key; ARGV window ms, the reservation's window id, points reserved, actual, limit, id
 * for a new window. Returns {used, ms left}.
 */
const settleScript = `${prelude}
local window, delta, limit = ARGV[2], tonumber(ARGV[4]) - tonumber(ARGV[3]), tonumber(ARGV[5])
local w = load(KEYS[1])
if not w then
  if delta <= 0 then return {0, W} end
  w = fresh()
end
if w.rolled then w.id = ARGV[6] end
local change = math.max(delta, 0)
if w.id == window then
  change = delta
elseif w.prev == window then
  if delta > 0 then
    w.carried = w.carried + delta
  else
    change = -math.min(-delta, w.carried)
    w.carried = w.carried + change
  end
end
if change == 0 and not w.rolled then return {w.used, w.ends - now} end
w.used = math.max(w.used + change, 0)
save(KEYS[1], w, limit)
return {w.used, w.ends - now}
`;

/** KEYS[1] key; ARGV window ms. Returns {used, ms left} as of now, writing nothing. */
const peekScript = `${prelude}
local w = load(KEYS[1])
if not w then return {0, W} end
return {w.used, w.ends - now}
`;

type ScriptClient = Redis & {
  switchyardTokenReserve2(
    key: string,
    windowMs: number,
    points: number,
    minimum: number,
    limit: number,
    id: string,
  ): Promise<unknown>;
  switchyardTokenSettle2(
    key: string,
    windowMs: number,
    window: string,
    reserved: number,
    actual: number,
    limit: number,
    id: string,
  ): Promise<unknown>;
  switchyardTokenPeek2(key: string, windowMs: number): Promise<unknown>;
};

/** Whole, non-negative token counts only reach the store (a NaN would poison a Redis count). */
function whole(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

export function createTokenCounter(options: TokenCounterOptions): TokenCounter {
  const { windowSeconds, prefix, logger } = options;
  const windowMs = windowSeconds * 1000;
  const memory = new MemoryWindows(windowMs);
  // Client-chosen keys (a header value) can be long: hashed, as limiter.ts does.
  const storeKey = (key: string) => `${prefix}:${key.length <= 200 ? key : `sha256:${sha256Hex(key)}`}`;
  const redis = options.redis as ScriptClient | undefined;
  const bounds = (points: number, minimum: number | undefined) => {
    const most = whole(points);
    return { most, least: minimum === undefined ? most : Math.min(Math.max(whole(minimum), 1), most) };
  };
  if (!redis) {
    return {
      windowSeconds,
      reserve: async (key, points, limit, minimum) => {
        const { most, least } = bounds(points, minimum);
        return memory.reserve(storeKey(key), key, most, least, limit, 'memory');
      },
      settle: async (r, actual, limit) => memory.settle(storeKey(r.key), r, whole(actual), limit, 'memory'),
      peek: async (key, limit) => memory.peek(storeKey(key), limit, 'memory'),
      close: () => memory.close(),
    };
  }
  // defineCommand: EVALSHA, falling back to EVAL once per connection when the script is not cached.
  // (The names carry a version: a process running the scripts before debts were kept uses its own.)
  if (typeof redis.switchyardTokenReserve2 !== 'function') {
    redis.defineCommand('switchyardTokenReserve2', { numberOfKeys: 1, lua: reserveScript });
    redis.defineCommand('switchyardTokenSettle2', { numberOfKeys: 1, lua: settleScript });
    redis.defineCommand('switchyardTokenPeek2', { numberOfKeys: 1, lua: peekScript });
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
    reserve(key, points, limit, minimum) {
      const k = storeKey(key);
      const { most, least } = bounds(points, minimum);
      return withFallback<ReserveResult>(
        async () => {
          const [ok, taken, used, msLeft, id] = (await redis.switchyardTokenReserve2(
            k,
            windowMs,
            most,
            least,
            limit,
            randomUUID(),
          )) as [number, number, number, number, string];
          const state = stateOf(limit, Number(used), Number(msLeft), windowMs, 'redis');
          return ok === 1
            ? reserveResult(state, true, { key, points: Number(taken), window: String(id), store: 'redis' })
            : reserveResult(state, false);
        },
        () => memory.reserve(k, key, most, least, limit, 'memory-fallback'),
      );
    },
    settle(r, actual, limit) {
      const k = storeKey(r.key);
      const spent = whole(actual);
      // A reservation made in memory (Redis was down) is settled there: Redis never counted it.
      if (r.store !== 'redis') return Promise.resolve(memory.settle(k, r, spent, limit, r.store));
      return withFallback(
        async () => {
          const [used, msLeft] = (await redis.switchyardTokenSettle2(
            k,
            windowMs,
            r.window,
            r.points,
            spent,
            limit,
            randomUUID(),
          )) as [number, number];
          return stateOf(limit, Number(used), Number(msLeft), windowMs, 'redis');
        },
        () => memory.settle(k, r, spent, limit, 'memory-fallback'),
      );
    },
    peek(key, limit) {
      const k = storeKey(key);
      return withFallback(
        async () => {
          const [used, msLeft] = (await redis.switchyardTokenPeek2(k, windowMs)) as [number, number];
          return stateOf(limit, Number(used), Number(msLeft), windowMs, 'redis');
        },
        () => memory.peek(k, limit, 'memory-fallback'),
      );
    },
    close: () => memory.close(),
  };
}

/**
 * A reservation's answer written out field by field, not spread from its state with keys added:
 * in Node 20 such a spread gives every object a hidden class of its own, made in the old
 * generation (docs/architecture.md, "Process tuning"), and this one is made on every request the
 * token limit admits (measured: a reserve and settle 4.3 µs, 27% of it in the collector; written
 * out 0.72 µs; test/services/hidden-classes.test.ts).
 */
function reserveResult(state: TokenState, allowed: boolean, reservation?: Reservation): ReserveResult {
  const result: ReserveResult = {
    limit: state.limit,
    used: state.used,
    remaining: state.remaining,
    resetAt: state.resetAt,
    msLeft: state.msLeft,
    store: state.store,
    allowed,
  };
  if (reservation) result.reservation = reservation;
  return result;
}

function stateOf(
  limit: number,
  used: number,
  msLeft: number,
  windowMs: number,
  store: TokenState['store'],
): TokenState {
  const left = msLeft > 0 ? msLeft : windowMs;
  return {
    limit,
    used,
    remaining: Math.max(limit - used, 0),
    resetAt: Math.ceil((Date.now() + left) / 1000),
    msLeft: left,
    store,
  };
}

interface MemoryWindow {
  used: number;
  id: string;
  endsAt: number;
  /** The limit last given for the key: what the window's debt is measured against when it ends. */
  limit: number;
  /** The window before this one, and the debt it carried over that a late refund may take back. */
  prev?: string;
  carried: number;
  /** When the entry may go: a window after its end, later while it is in debt. */
  expiresAt: number;
}

/** The memory store: the same windows and debt as the Redis scripts, one entry per key. */
class MemoryWindows {
  readonly #windows = new Map<string, MemoryWindow>();
  readonly #sweep: NodeJS.Timeout;

  constructor(private readonly windowMs: number) {
    this.#sweep = setInterval(() => {
      const now = Date.now();
      for (const [k, w] of this.#windows) if (w.expiresAt <= now) this.#windows.delete(k);
    }, windowMs);
    this.#sweep.unref();
  }

  /** The key's window as of now, rolled over (debt carried) when it ended; opened when asked to. */
  #current(k: string, open: boolean, limit: number): MemoryWindow | undefined {
    const now = Date.now();
    const w = this.#windows.get(k);
    if (w && now < w.endsAt) return w;
    let next: MemoryWindow | undefined;
    if (w) {
      const idle = Math.floor((now - w.endsAt) / this.windowMs);
      const carry = Math.max(w.used - w.limit * (1 + idle), 0);
      next = {
        used: carry,
        id: randomUUID(),
        endsAt: now + this.windowMs,
        limit,
        prev: w.id,
        carried: carry,
        expiresAt: 0,
      };
    } else if (open) {
      next = { used: 0, id: randomUUID(), endsAt: now + this.windowMs, limit, carried: 0, expiresAt: 0 };
    }
    if (next) this.#keep(k, next, limit, now);
    else this.#windows.delete(k);
    return next;
  }

  #keep(k: string, w: MemoryWindow, limit: number, now = Date.now()): void {
    w.limit = limit;
    const debt = Math.max(w.used - limit, 0);
    w.expiresAt = w.endsAt + this.windowMs * (1 + Math.ceil(debt / limit));
    if (w.expiresAt <= now) this.#windows.delete(k);
    else this.#windows.set(k, w);
  }

  #state(w: MemoryWindow | undefined, limit: number, store: TokenState['store']): TokenState {
    return stateOf(limit, w?.used ?? 0, w ? w.endsAt - Date.now() : -1, this.windowMs, store);
  }

  reserve(
    k: string,
    key: string,
    most: number,
    least: number,
    limit: number,
    store: TokenState['store'],
  ): ReserveResult {
    const w = this.#current(k, true, limit) as MemoryWindow;
    const take = Math.min(most, limit - w.used);
    if (take < least) {
      this.#keep(k, w, limit);
      return reserveResult(this.#state(w, limit, store), false);
    }
    w.used += take;
    this.#keep(k, w, limit);
    return reserveResult(this.#state(w, limit, store), true, { key, points: take, window: w.id, store });
  }

  settle(k: string, r: Reservation, actual: number, limit: number, store: TokenState['store']): TokenState {
    const delta = actual - r.points;
    let w = this.#current(k, false, limit);
    let change = Math.max(delta, 0);
    if (w?.id === r.window) change = delta;
    else if (w && w.prev === r.window) {
      if (delta > 0) w.carried += delta;
      else {
        change = -Math.min(-delta, w.carried);
        w.carried += change;
      }
    }
    if (change > 0 && !w) w = this.#current(k, true, limit);
    if (w && change !== 0) {
      w.used = Math.max(w.used + change, 0);
      this.#keep(k, w, limit);
    }
    return this.#state(w, limit, store);
  }

  peek(k: string, limit: number, store: TokenState['store']): TokenState {
    const w = this.#windows.get(k);
    if (!w) return this.#state(undefined, limit, store);
    const now = Date.now();
    if (now < w.endsAt) return this.#state(w, limit, store);
    // Ended: what the next request would find, without opening it.
    const carry = Math.max(w.used - w.limit * (1 + Math.floor((now - w.endsAt) / this.windowMs)), 0);
    return stateOf(limit, carry, this.windowMs, this.windowMs, store);
  }

  close(): void {
    clearInterval(this.#sweep);
  }
}
