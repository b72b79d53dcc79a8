/**
 * Public contract of the `entity-store` resource: the store itself plus the operator's views of
 * it (query statistics, storage sizes, slow queries). Stages (`entity-api`, `ops-api`) import
 * this file by relative path, as types only.
 *
 *   const db = env.resource<EntityStoreResource>(options.store);
 *   await db.store.get('item', 42);
 */
import type { EntityStore } from '../../runtime/index.ts';

// The three operator reports are ops-api's contract (what /admin/stats/* serve and
// `switchyard admin` prints); the entity-store resource implements it.
import type { QueryStats, SlowQueries, StorageStats } from '../ops-api/api.ts';

export type { QueryStats, SlowQueries, StorageStats };

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
