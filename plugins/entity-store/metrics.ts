/**
 * The store's metrics, named as the database server's operations interface names them
 * (`db_query_*`, `db_mutation_*`, `db_storage_*`, `db_entity_*`). Counters and histograms are fed
 * by the store's observer as queries run; the storage and entity gauges are computed when
 * scraped, from a snapshot each store keeps for a few seconds so that a scrape stays cheap.
 *
 * Metrics are get-or-create on the service's registry and outlive a graph, while a gauge's
 * `collect` is fixed when it is first created. So the gauges read the stores through a
 * per-registry list of snapshot sources, which each resource joins when it opens and leaves when
 * it closes: after a reload they report the new store, never a closed one.
 */
import type { Gauge, Registry } from 'prom-client';
import { type EntityStoreObserver, latencyBuckets, type MetricsKit } from '../../runtime/index.ts';

/** What the gauges report; a field left undefined is unknown (written as NaN). */
export interface StorageSnapshot {
  dataBytes?: number;
  indexBytes?: number;
  walBytes?: number;
  freeBytes?: number;
  types: Array<{ type: string; count: number; bytes: number }>;
}

export interface SnapshotSource {
  snapshot(): Promise<StorageSnapshot>;
  cacheRatio(): number | undefined;
}

const sources = new WeakMap<Registry, Set<SnapshotSource>>();

/** Row-count buckets for rows returned, entities scanned and rows affected. */
const rowBuckets = [0, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000, 100000];

export interface StoreMetrics {
  observer: EntityStoreObserver;
  cacheHit(): void;
  cacheMiss(): void;
  /** Adds a store to the gauges; returns the function that removes it. */
  addSource(source: SnapshotSource): () => void;
}

export function storeMetrics(kit: MetricsKit): StoreMetrics {
  const queries = kit.counter({
    name: 'db_query_total',
    help: 'Entity queries (get, query, count), by kind and status (ok or error); reads answered by the read cache included',
    labelNames: ['kind', 'status'] as const,
  });
  const queryDuration = kit.histogram({
    name: 'db_query_duration_seconds',
    help: 'Duration of entity queries, relation expansion included',
    labelNames: ['kind'] as const,
    buckets: latencyBuckets,
  });
  const rowsReturned = kit.histogram({
    name: 'db_query_rows_returned',
    help: 'Entities returned by a query (expanded ones included)',
    buckets: rowBuckets,
  });
  const scanned = kit.histogram({
    name: 'db_query_entities_scanned',
    help: 'Entities the database read to answer a query',
    buckets: rowBuckets,
  });
  const budget = kit.counter({
    name: 'db_query_budget_exceeded_total',
    help: 'Queries refused for exceeding a budget (max_entities or max_depth)',
    labelNames: ['budget'] as const,
  });
  // Both series exist from the start: a rate() over them works before the first refusal.
  for (const b of ['max_entities', 'max_depth']) budget.inc({ budget: b }, 0);
  const mutations = kit.counter({
    name: 'db_mutation_total',
    help: 'Entity mutations (create, update, upsert, delete), by kind and status (ok or error)',
    labelNames: ['kind', 'status'] as const,
  });
  const mutationDuration = kit.histogram({
    name: 'db_mutation_duration_seconds',
    help: 'Duration of entity mutations',
    labelNames: ['kind'] as const,
    buckets: latencyBuckets,
  });
  const rowsAffected = kit.histogram({
    name: 'db_mutation_rows_affected',
    help: 'Entities changed by a mutation',
    buckets: rowBuckets,
  });
  const conflicts = kit.counter({
    name: 'db_mutation_conflicts_total',
    help: 'Mutations refused because the entity version had changed (optimistic concurrency)',
  });
  const hits = kit.counter({
    name: 'db_storage_cache_hits_total',
    help: 'Entity reads by id answered from the read cache',
  });
  const misses = kit.counter({
    name: 'db_storage_cache_misses_total',
    help: 'Entity reads by id that had to go to the database',
  });

  const registry = kit.registry;
  let list = sources.get(registry);
  if (!list) {
    list = new Set();
    sources.set(registry, list);
  }
  const live = list;
  registerGauges(kit, live);

  return {
    observer: {
      onQuery(e) {
        queries.inc({ kind: e.kind, status: e.error ? 'error' : 'ok' });
        queryDuration.observe({ kind: e.kind }, e.durationMs / 1000);
        if (!e.error) {
          rowsReturned.observe(e.rowsReturned);
          scanned.observe(e.entitiesScanned);
        }
      },
      onMutation(e) {
        mutations.inc({ kind: e.kind, status: e.error ? 'error' : 'ok' });
        mutationDuration.observe({ kind: e.kind }, e.durationMs / 1000);
        if (!e.error) rowsAffected.observe(e.rowsAffected);
      },
      onConflict() {
        conflicts.inc();
      },
      onBudgetExceeded(e) {
        budget.inc({ budget: e.budget });
      },
    },
    cacheHit: () => hits.inc(),
    cacheMiss: () => misses.inc(),
    addSource(source) {
      live.add(source);
      return () => live.delete(source);
    },
  };
}

/** The scrape-time gauges, created once per registry. */
function registerGauges(kit: MetricsKit, live: Set<SnapshotSource>): void {
  if (kit.registry.getSingleMetric('db_storage_size_bytes')) return;

  // One combined snapshot per scrape: every gauge's collect asks, the first one computes.
  let pending: { at: number; value: Promise<StorageSnapshot[]> } | undefined;
  const snapshots = (): Promise<StorageSnapshot[]> => {
    const now = Date.now();
    if (!pending || now - pending.at > 500) {
      // A store that cannot answer (storage down) is left out rather than failing the scrape.
      const value = Promise.all([...live].map((s) => s.snapshot().catch(() => undefined))).then((all) =>
        all.filter((s): s is StorageSnapshot => s !== undefined),
      );
      pending = { at: now, value };
    }
    return pending.value;
  };
  const sum = (all: StorageSnapshot[], pick: (s: StorageSnapshot) => number | undefined): number => {
    const known = all.map(pick).filter((v): v is number => v !== undefined);
    return known.length === 0 ? Number.NaN : known.reduce((a, b) => a + b, 0);
  };
  const plain = (name: string, help: string, value: (all: StorageSnapshot[]) => number) =>
    kit.gauge({
      name,
      help,
      async collect(this: Gauge) {
        this.set(value(await snapshots()));
      },
    });

  plain('db_storage_size_bytes', 'Bytes of stored data (tables)', (all) => sum(all, (s) => s.dataBytes));
  plain('db_storage_index_size_bytes', 'Bytes of indexes', (all) => sum(all, (s) => s.indexBytes));
  plain('db_storage_wal_size_bytes', 'Bytes of write-ahead log', (all) => sum(all, (s) => s.walBytes));
  plain('db_storage_free_bytes', 'Free bytes on the disk holding the data (unknown for a remote database)', (all) => {
    const known = all.map((s) => s.freeBytes).filter((v): v is number => v !== undefined);
    return known.length === 0 ? Number.NaN : Math.min(...known);
  });
  kit.gauge({
    name: 'db_storage_cache_hit_ratio',
    help: 'Share of entity reads by id answered from the read cache, 0 to 1 (NaN before the first read)',
    collect(this: Gauge) {
      const ratios = [...live].map((s) => s.cacheRatio()).filter((v): v is number => v !== undefined);
      this.set(ratios.length === 0 ? Number.NaN : ratios.reduce((a, b) => a + b, 0) / ratios.length);
    },
  });
  const perType = (name: string, help: string, pick: (t: StorageSnapshot['types'][number]) => number) =>
    kit.gauge({
      name,
      help,
      labelNames: ['entity_type'] as const,
      async collect(this: Gauge<'entity_type'>) {
        const all = await snapshots();
        this.reset();
        const totals = new Map<string, number>();
        for (const s of all) for (const t of s.types) totals.set(t.type, (totals.get(t.type) ?? 0) + pick(t));
        for (const [type, value] of totals) this.set({ entity_type: type }, value);
      },
    });
  perType('db_entity_count', 'Stored entities, by entity type', (t) => t.count);
  perType('db_entity_size_bytes', 'Approximate bytes of stored entities, by entity type', (t) => t.bytes);
}
