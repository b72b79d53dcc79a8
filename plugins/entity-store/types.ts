/**
 * Public contract of the `entity-store` resource: the store itself plus the operator's views of
 * it (query statistics, storage sizes, slow queries). Stages (`entity-api`, `ops-api`) import
 * this file by relative path, as types only.
 *
 *   const db = env.resource<EntityStoreResource>(options.store);
 *   await db.store.get('item', 42);
 */
import type { EntityStore } from '../../runtime/index.ts';

/** `queryStats()`: the last hour's queries (`stats --queries`). Durations in milliseconds. */
export interface QueryStats {
  window_seconds: 3600;
  total: number;
  errors: number;
  avg_ms: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  /** Entity types by number of queries, most queried first (at most 10). */
  top_entities: Array<{ entity: string; queries: number }>;
}

/** `storageStats()`: sizes in bytes, cache figures of the resource's read cache; null where unknown. */
export interface StorageStats {
  data_bytes: number | null;
  index_bytes: number | null;
  wal_bytes: number | null;
  free_bytes: number | null;
  cache_hits: number | null;
  cache_misses: number | null;
  /** hits / (hits + misses), 0 to 1; null before the first cached read. */
  cache_hit_ratio: number | null;
}

/** `slowQueries(limit)`: queries over the threshold, grouped by shape, worst (`max_ms`) first. */
export interface SlowQueries {
  threshold_ms: number;
  queries: Array<{
    shape: string;
    entity: string;
    count: number;
    avg_ms: number;
    max_ms: number;
    /** ISO 8601 time of the latest occurrence. */
    last_at: string;
  }>;
}

/** The value of an `entity-store` resource. */
export interface EntityStoreResource {
  /**
   * The store. While a PostgreSQL server is unreachable at start, every call throws a 503
   * `unavailable` GatewayError until the store opens (it retries in the background).
   */
  store: EntityStore;
  queryStats(): QueryStats;
  storageStats(): Promise<StorageStats>;
  slowQueries(limit?: number): SlowQueries;
}
