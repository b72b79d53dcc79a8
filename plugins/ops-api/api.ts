/**
 * What `ops-api` asks of a store resource (option `store`): three reports, answered as they are
 * under /admin/stats/queries, /admin/stats/storage and /admin/slow-queries. The `entity-store`
 * resource implements it; a value may return the reports directly or as promises. A figure the
 * store cannot know is `null`.
 */

/** Query activity over the last `window_seconds` (an hour). */
export interface QueryStats {
  window_seconds: number;
  total: number;
  errors: number;
  avg_ms: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  /** Most queried entity types first. */
  top_entities: Array<{ entity: string; queries: number }>;
}

export interface StorageStats {
  data_bytes: number | null;
  index_bytes: number | null;
  wal_bytes: number | null;
  /** Free space on the disk holding the data. */
  free_bytes: number | null;
  cache_hits: number | null;
  cache_misses: number | null;
  /** hits / (hits + misses), 0 to 1. */
  cache_hit_ratio: number | null;
}

/** Queries slower than `threshold_ms`, grouped by shape. */
export interface SlowQueries {
  threshold_ms: number;
  queries: Array<{
    shape: string;
    entity: string;
    count: number;
    avg_ms: number;
    max_ms: number;
    /** ISO 8601 time of the last occurrence. */
    last_at: string;
  }>;
}

export interface OpsStatsSource {
  queryStats(): QueryStats | Promise<QueryStats>;
  storageStats(): StorageStats | Promise<StorageStats>;
  /** The `limit` slowest shapes (by max duration or as the store ranks them). */
  slowQueries(limit: number): SlowQueries | Promise<SlowQueries>;
}
