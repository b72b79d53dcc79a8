/**
 * entity-store: the runtime's entity store (typed JSON entities, versions, budgets, change log)
 * as a resource, with the database server's operations interface around it: `db_*` metrics, a
 * slow-query log, query and storage statistics, a read cache, and a health check that pings it.
 *
 *   resources:
 *     store: { type: entity-store, path: ../.data/datastore.db }
 *     store: { type: entity-store, driver: postgres, url: "${DATABASE_URL}" }
 *
 * SQLite opens at start (a bad path fails the start). PostgreSQL may be down when the service
 * starts: the resource then keeps trying (1 s, doubling to 30 s), health and readiness report
 * `error`, and every store call answers 503 until it opens. See docs/datastore.md.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  defineResource,
  type EntityStore,
  type EntityStoreObserver,
  type FromSchema,
  isGatewayError,
  type JsonSchema,
  openEntityStore,
  openSqlDatabase,
  type SqlDatabase,
} from '../../runtime/index.ts';
import type { EntityStoreResource, StorageStats } from './api.ts';
import { createFacade } from './facade.ts';
import { storeMetrics } from './metrics.ts';
import { QueryWindow } from './query-stats.ts';
import { SlowQueryLog } from './slow-queries.ts';
import { StorageSampler } from './storage.ts';

const FIELD = '^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$';
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 30_000;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    driver: { enum: ['sqlite', 'postgres'], default: 'sqlite' },
    path: {
      type: 'string',
      minLength: 1,
      default: './data/entities.db',
      description: 'sqlite: database file, relative to the config file (its directory is created)',
    },
    url: {
      type: 'string',
      description: 'postgres: connection string, e.g. postgres://user@127.0.0.1:5432/db',
    },
    pool_size: { type: 'integer', minimum: 1, default: 10, description: 'postgres: connections' },
    sync_mode: {
      enum: ['normal', 'full'],
      default: 'full',
      description: 'sqlite: full = a commit survives power loss; normal = survives a process crash only (faster)',
    },
    cache_size_mb: {
      type: 'integer',
      minimum: 0,
      default: 64,
      description: 'Read cache of entities by id, in MiB (0: none); on SQLite also the page cache',
    },
    cache_max_staleness_ms: {
      type: 'integer',
      minimum: 0,
      default: 250,
      description: "How old a cached read may be with respect to other processes' writes (0: always checked)",
    },
    max_entities: {
      type: 'integer',
      minimum: 1,
      default: 10000,
      description: 'Most entities one query may return, expanded ones included',
    },
    max_depth: { type: 'integer', minimum: 1, default: 3, description: 'Deepest relation expansion' },
    table_prefix: {
      type: 'string',
      pattern: '^[A-Za-z_][A-Za-z0-9_]{0,39}$',
      default: 'entity_',
      description: 'Prefix of the store tables (several stores in one database)',
    },
    indexes: {
      type: 'object',
      default: {},
      description: 'Fields to index per entity type, e.g. {item: [rating, name]}',
      propertyNames: { pattern: '^[a-z][a-z0-9_]*$' },
      additionalProperties: { type: 'array', items: { type: 'string', pattern: FIELD } },
    },
    slow_query: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: 'boolean', default: true },
        threshold_ms: {
          type: 'integer',
          minimum: 0,
          default: 100,
          description: 'Queries slower than this are logged',
        },
        log_file: {
          type: 'string',
          description: 'JSON-lines file, relative to the config file; empty or absent: the service log',
        },
      },
    },
  },
} as const satisfies JsonSchema;
/** The options as `create` gets them (defaults applied). */
export type EntityStoreOptions = FromSchema<typeof optionsSchema>;

export default defineResource<EntityStoreOptions, EntityStoreResource>({
  type: 'entity-store',
  description: 'Entity store (SQLite file or PostgreSQL) with db_* metrics, slow-query log and statistics',
  options: optionsSchema,
  async create(options, env) {
    const driver = options.driver;
    const limits = { maxEntities: options.max_entities, maxDepth: options.max_depth };
    const slowOptions = options.slow_query;
    const cacheMb = options.cache_size_mb;
    const metrics = storeMetrics(env.metrics);
    const window = new QueryWindow();
    const slow = new SlowQueryLog({
      enabled: slowOptions.enabled,
      thresholdMs: slowOptions.threshold_ms,
      file: slowOptions.log_file ? env.resolvePath(slowOptions.log_file) : undefined,
      logger: env.logger,
    });
    const observer: EntityStoreObserver = {
      ...metrics.observer,
      onQuery(event) {
        metrics.observer.onQuery?.(event);
        window.record(event.type, event.durationMs, event.error !== undefined);
        slow.observe(event);
      },
    };

    // The database: SQLite opens (and creates) its file now; PostgreSQL connects lazily.
    let db: SqlDatabase;
    let dataDir: string | undefined;
    let where: Record<string, unknown>;
    if (driver === 'postgres') {
      if (!options.url) throw new Error('entity-store: driver postgres needs a url');
      db = await openSqlDatabase({ driver: 'postgres', url: options.url, pool_size: options.pool_size });
      where = { driver, database: describeUrl(options.url) };
    } else {
      const path = env.resolvePath(options.path);
      dataDir = dirname(path);
      mkdirSync(dataDir, { recursive: true });
      db = await openSqlDatabase({
        driver: 'sqlite',
        path,
        synchronous: options.sync_mode === 'normal' ? 'NORMAL' : 'FULL',
        ...(cacheMb > 0 ? { cache_size_mb: cacheMb } : {}),
      });
      where = { driver, path };
    }

    let store: EntityStore | undefined;
    let lastError = 'opening';
    let retryTimer: NodeJS.Timeout | undefined;
    let closed = false;
    let removeSource: (() => void) | undefined;
    let sampler: StorageSampler | undefined;

    const facade = createFacade(
      () => store,
      () => lastError,
      { driver, limits },
      {
        maxBytes: cacheMb * 1024 * 1024,
        maxStalenessMs: options.cache_max_staleness_ms,
        onHit(read) {
          metrics.cacheHit();
          observer.onQuery?.({
            kind: 'get',
            type: read.type,
            shape: `get ${read.type} (cache)`,
            durationMs: read.durationMs,
            rowsReturned: 1,
            entitiesScanned: 0,
            requestId: read.requestId,
          });
        },
        onMiss: metrics.cacheMiss,
      },
      () => close(),
    );

    const open = async (): Promise<void> => {
      const opened = await openEntityStore(db, {
        maxEntities: limits.maxEntities,
        maxDepth: limits.maxDepth,
        indexes: options.indexes,
        tablePrefix: options.table_prefix,
        observer,
      });
      if (closed) {
        await opened.close();
        return;
      }
      store = opened;
      facade.opened(opened);
      const openedSampler = new StorageSampler(opened, dataDir);
      sampler = openedSampler;
      removeSource = metrics.addSource({
        snapshot: () => openedSampler.snapshot(),
        cacheRatio: () => ratio(facade.cacheCounts()),
      });
      env.logger.info({ ...where, limits }, 'entity store open');
    };

    const retry = (delayMs: number) => {
      retryTimer = setTimeout(async () => {
        if (closed) return;
        try {
          await open();
        } catch (err) {
          lastError = (err as Error).message;
          env.logger.warn({ ...where, err: lastError, retry_ms: delayMs }, 'entity store still unavailable');
          retry(Math.min(delayMs * 2, RETRY_MAX_MS));
        }
      }, delayMs);
      retryTimer.unref();
    };

    async function close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(retryTimer);
      removeSource?.();
      await slow.close();
      if (store) await store.close();
      else await db.close();
    }

    try {
      await open();
    } catch (err) {
      lastError = (err as Error).message;
      // A file that cannot be used, or options the store refuses, are configuration problems;
      // a PostgreSQL server that cannot be reached (down, starting, credentials not provisioned
      // yet) is waited for.
      if (driver === 'sqlite' || isGatewayError(err)) {
        await db.close().catch(() => {});
        throw new Error(`entity-store: cannot open the store: ${lastError}`);
      }
      env.logger.error({ ...where, err: lastError }, 'entity store unavailable, retrying');
      retry(RETRY_MIN_MS);
    }

    const storageStats = async (): Promise<StorageStats> => {
      const counts = facade.cacheCounts();
      let sizes: { dataBytes?: number; indexBytes?: number; walBytes?: number; freeBytes?: number } = {};
      if (sampler) {
        try {
          sizes = await sampler.sizes();
        } catch {
          sizes = {}; // storage down: every size unknown
        }
      }
      return {
        data_bytes: sizes.dataBytes ?? null,
        index_bytes: sizes.indexBytes ?? null,
        wal_bytes: sizes.walBytes ?? null,
        free_bytes: sizes.freeBytes ?? null,
        cache_hits: counts?.hits ?? null,
        cache_misses: counts?.misses ?? null,
        cache_hit_ratio: ratio(counts) ?? null,
      };
    };

    const describe = () => ({
      ...where,
      open: store !== undefined,
      max_entities: limits.maxEntities,
      max_depth: limits.maxDepth,
      cache_size_mb: cacheMb,
      slow_query_threshold_ms: slow.thresholdMs,
    });

    return {
      value: {
        store: facade.store,
        queryStats: () => window.stats(),
        storageStats,
        slowQueries: (limit = 10) => slow.report(limit),
      },
      describe,
      async health() {
        if (!store) return { ok: false, status: 'error', error: lastError };
        try {
          await store.ping();
          return { ok: true, status: 'ok', detail: describe() };
        } catch (err) {
          return { ok: false, status: 'error', error: (err as Error).message };
        }
      },
      close,
    };
  },
});

function ratio(counts: { hits: number; misses: number } | undefined): number | undefined {
  if (!counts || counts.hits + counts.misses === 0) return undefined;
  return Math.round((counts.hits / (counts.hits + counts.misses)) * 10000) / 10000;
}

/** host:port/database of a connection string, without credentials (for describe and logs). */
function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'postgres';
  }
}
