/**
 * The store the resource hands out: the runtime's EntityStore, plus two things the resource adds.
 *
 * - Availability: the store may not be open yet (a PostgreSQL server that was down at start;
 *   the resource keeps retrying). Until it is, every call throws `503 unavailable`, and
 *   readiness says `storage: error`.
 * - A read cache of entities by id (`get` without `expand`), bounded in bytes, whose hits and
 *   misses are `db_storage_cache_*`. A write through this process evicts its entity at once.
 *   Writes by other processes (cluster workers, other gateways on the same PostgreSQL) are
 *   noticed through the change log: at most every `maxStalenessMs` a cache hit first checks the
 *   log's head (`lastSeq`), and the whole cache is dropped when it moved. `maxStalenessMs: 0`
 *   checks on every hit.
 */
import { LRUCache } from 'lru-cache';
import {
  type ChangeRecord,
  type Entity,
  type EntityOperations,
  type EntityStore,
  GatewayError,
  type MutationOptions,
} from '../../runtime/index.ts';

export interface ReadCacheOptions {
  /** Bytes of cached entities (estimated from their JSON); 0 disables the cache. */
  maxBytes: number;
  maxStalenessMs: number;
  /** A read answered from the cache: counted as a query too (it answered one), and as a hit. */
  onHit(read: { type: string; durationMs: number; requestId?: string }): void;
  onMiss(): void;
}

export interface StoreFacade {
  store: EntityStore;
  cacheCounts(): { hits: number; misses: number } | undefined;
  /** Call when the underlying store has opened: applies a read-only mode set before. */
  opened(s: EntityStore): void;
}

type Data = Record<string, unknown>;

/**
 * `current()` returns the open store or undefined; `unavailable()` says why it is not open.
 * `driver` and `limits` are known from the options before the store opens.
 */
export function createFacade(
  current: () => EntityStore | undefined,
  unavailable: () => string,
  known: { driver: EntityStore['driver']; limits: EntityStore['limits'] },
  cacheOptions: ReadCacheOptions,
  closeAll: () => Promise<void>,
): StoreFacade {
  const open = (): EntityStore => {
    const s = current();
    if (s) return s;
    throw new GatewayError('unavailable', 'Storage is not available', {
      code: 'storage_unavailable',
      details: { storage: 'error', reason: unavailable() },
      headers: { 'Retry-After': '5' },
    });
  };

  const cache =
    cacheOptions.maxBytes > 0
      ? new LRUCache<string, Entity>({
          maxSize: cacheOptions.maxBytes,
          sizeCalculation: (e) => JSON.stringify(e.data).length + 200,
        })
      : undefined;
  let readOnly: string | undefined;
  let hits = 0;
  let misses = 0;
  /** Bumped by every write: a read that overlapped a write does not fill the cache. */
  let generation = 0;
  let headSeq: number | undefined;
  let checkedAt = 0;
  const keyOf = (type: string, id: number) => `${type}:${id}`;
  const evictOne = (type: string, id: number) => {
    generation++;
    cache?.delete(keyOf(type, id));
  };
  const evictAll = () => {
    generation++;
    cache?.clear();
  };

  /** Drops the cache when the change log moved since the last check (someone else wrote). */
  async function validate(s: EntityStore): Promise<void> {
    const now = Date.now();
    if (headSeq !== undefined && now - checkedAt < cacheOptions.maxStalenessMs) return;
    const seq = await s.lastSeq();
    checkedAt = now;
    if (headSeq !== undefined && seq !== headSeq) evictAll();
    headSeq = seq;
  }

  async function cachedGet<T extends Data>(
    s: EntityStore,
    type: string,
    id: number,
    options?: { expand?: string[]; requestId?: string },
  ): Promise<Entity<T> | undefined> {
    if (!cache || (options?.expand && options.expand.length > 0)) return s.get<T>(type, id, options);
    const started = performance.now();
    await validate(s);
    const key = keyOf(type, id);
    const hit = cache.get(key);
    if (hit) {
      const copy = structuredClone(hit) as Entity<T>;
      hits++;
      cacheOptions.onHit({ type, durationMs: performance.now() - started, requestId: options?.requestId });
      return copy;
    }
    misses++;
    cacheOptions.onMiss();
    const before = generation;
    const found = await s.get<T>(type, id, options);
    if (found && generation === before) cache.set(key, structuredClone(found) as Entity);
    return found;
  }

  /** Wraps the writes of `ops` so that each evicts what it changed (and notes it in `touched`). */
  function evicting(ops: EntityOperations, touched?: Set<string>): EntityOperations {
    const evict = (type: string, id: number) => {
      evictOne(type, id);
      touched?.add(keyOf(type, id));
    };
    return {
      create: (type, data, options) => ops.create(type, data, options),
      get: (type, id, options) => ops.get(type, id, options),
      getByKey: (type, key) => ops.getByKey(type, key),
      getMany: (type, ids) => ops.getMany(type, ids),
      query: (type, options) => ops.query(type, options),
      count: (type, filter) => ops.count(type, filter),
      async update<T extends Data>(type: string, id: number, data: T, options?: MutationOptions) {
        try {
          return await ops.update(type, id, data, options);
        } finally {
          evict(type, id);
        }
      },
      async upsertByKey<T extends Data>(type: string, key: string, data: T, options?: MutationOptions) {
        const e = await ops.upsertByKey(type, key, data, options);
        evict(type, e.id);
        return e;
      },
      async delete(type, id, options) {
        try {
          return await ops.delete(type, id, options);
        } finally {
          evict(type, id);
        }
      },
    };
  }

  const store: EntityStore = {
    get driver() {
      return known.driver;
    },
    get limits() {
      return known.limits;
    },
    get sql() {
      return open().sql;
    },
    ...evicting({
      create: async (type, data, options) => open().create(type, data, options),
      get: async (type, id, options) => cachedGet(open(), type, id, options),
      getByKey: async (type, key) => open().getByKey(type, key),
      getMany: async (type, ids) => open().getMany(type, ids),
      query: async (type, options) => open().query(type, options),
      count: async (type, filter) => open().count(type, filter),
      update: async (type, id, data, options) => open().update(type, id, data, options),
      upsertByKey: async (type, key, data, options) => open().upsertByKey(type, key, data, options),
      delete: async (type, id, options) => open().delete(type, id, options),
    }),
    async transaction(fn, options) {
      // Evict again once it ended: a read between a write and the commit saw the old version.
      const touched = new Set<string>();
      try {
        return await open().transaction((tx) => fn(evicting(tx, touched)), options);
      } finally {
        generation++;
        for (const key of touched) cache?.delete(key);
      }
    },
    changesSince: async (afterSeq, limit) => open().changesSince(afterSeq, limit),
    lastSeq: async () => open().lastSeq(),
    async applyChange(change: ChangeRecord) {
      try {
        return await open().applyChange(change);
      } finally {
        evictOne(change.type, change.id);
      }
    },
    typeStats: async () => open().typeStats(),
    storageStats: async () => open().storageStats(),
    setReadOnly(reason) {
      readOnly = reason;
      current()?.setReadOnly(reason);
    },
    ping: async () => open().ping(),
    close: closeAll,
  };

  return {
    store,
    cacheCounts: () => (cache ? { hits, misses } : undefined),
    opened: (s) => {
      if (readOnly !== undefined) s.setReadOnly(readOnly);
    },
  };
}
