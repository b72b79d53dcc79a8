/**
 * The entity store (contract in entity-types.ts) on the SQL access layer: one implementation for
 * SQLite and PostgreSQL.
 *
 *   const store = await openEntityStore(db, { indexes: { item: ['rating'] } });
 *   await store.transaction(async (tx) => { ... }, { retries: 5 });
 *
 * Writes are serialised: every writing transaction holds the store's write lock from its first
 * statement to its commit (SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction-level advisory
 * lock). That is what makes the change log's seq gap-free and in commit order, and it means a
 * read-modify-write inside `transaction` sees the latest committed versions. Version checks
 * (entity-ops.ts) still guard every write, so a stale `ifVersion` is always refused.
 *
 * Inside `transaction(fn)`, use only the `tx` given to `fn`: calling the store itself from inside
 * waits for the transaction to end on SQLite (deadlock) and runs outside it on PostgreSQL.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { applyChangeTx, changesSince, lastSeq } from './entity-changelog.ts';
import { InvalidQueryError, VersionConflictError } from './entity-errors.ts';
import { type Access, entityOperations, errorLabel, notify, type StoreContext } from './entity-ops.ts';
import { createEntitySchema, entityTables } from './entity-schema.ts';
import { storageStats, typeStats } from './entity-stats.ts';
import type { ChangeRecord, EntityOperations, EntityStore, EntityStoreOptions } from './entity-types.ts';
import type { SqlDatabase, SqlExecutor } from './types.ts';

const DEFAULT_MAX_ENTITIES = 10_000;
const DEFAULT_MAX_DEPTH = 3;
const MAX_CHANGES_PAGE = 10_000;
const CHANGE_OPS = new Set(['create', 'update', 'delete']);

/** PostgreSQL's "try again" failures: serialization_failure, deadlock_detected. */
const RETRYABLE_PG_CODES = new Set(['40001', '40P01']);

function retryable(err: unknown): boolean {
  if (err instanceof VersionConflictError) return true;
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && RETRYABLE_PG_CODES.has(code);
}

function positiveInt(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

function checkChange(change: ChangeRecord): void {
  const c = change as Partial<Record<keyof ChangeRecord, unknown>>;
  const int = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;
  const ok =
    typeof c === 'object' &&
    c !== null &&
    int(c.seq) &&
    int(c.id) &&
    int(c.version) &&
    CHANGE_OPS.has(c.op as string) &&
    typeof c.type === 'string' &&
    (c.key === null || typeof c.key === 'string') &&
    typeof c.at === 'string' &&
    (c.op === 'delete' ? c.data === null : typeof c.data === 'object' && c.data !== null && !Array.isArray(c.data));
  if (!ok) throw new InvalidQueryError('change', 'not a valid change record');
}

export async function openEntityStore(db: SqlDatabase, options: EntityStoreOptions = {}): Promise<EntityStore> {
  const tables = entityTables(options.tablePrefix);
  const limits = {
    maxEntities: positiveInt(options.maxEntities, DEFAULT_MAX_ENTITIES, 'maxEntities'),
    maxDepth: positiveInt(options.maxDepth, DEFAULT_MAX_DEPTH, 'maxDepth'),
  };
  await createEntitySchema(db, tables, options.indexes);

  let readOnly: string | undefined;
  const { observer } = options;
  const ctx: StoreContext = { driver: db.driver, tables, limits, observer, readOnly: () => readOnly };
  const lock = { serialize: tables.lockKey };

  const direct = entityOperations(ctx, {
    read: (fn) => fn(db),
    write: (fn) => db.transaction(fn, lock),
  });

  /** One attempt of `fn` in a transaction; its `tx` stops working when the attempt ends. */
  const attempt = <R>(fn: (tx: EntityOperations) => Promise<R>) =>
    db.transaction(async (sqlTx) => {
      let open = true;
      const use = <T>(run: (ex: SqlExecutor) => Promise<T>) => {
        if (!open) return Promise.reject(new Error('the transaction is over: use tx only inside its function'));
        return run(sqlTx);
      };
      const access: Access = { read: use, write: use, seen: new Map() };
      try {
        return await fn(entityOperations(ctx, access));
      } finally {
        open = false;
      }
    }, lock);

  return {
    driver: db.driver,
    limits,
    sql: db,
    ...direct,

    async transaction<R>(fn: (tx: EntityOperations) => Promise<R>, runOptions: { retries?: number } = {}) {
      const retries = runOptions.retries ?? 0;
      for (let n = 0; ; n++) {
        try {
          return await attempt(fn);
        } catch (err) {
          if (n >= retries || !retryable(err)) throw err;
          // A little jitter so that retries of colliding writers do not collide again.
          await sleep(Math.random() * Math.min(2 ** n, 20));
        }
      }
    },

    async changesSince(afterSeq: number, limit = 1000) {
      if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
        throw new InvalidQueryError('after', 'afterSeq is a non-negative integer');
      }
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_CHANGES_PAGE) {
        throw new InvalidQueryError('limit', `limit is an integer from 1 to ${MAX_CHANGES_PAGE}`);
      }
      return changesSince(db, tables, afterSeq, limit);
    },

    lastSeq: () => lastSeq(db, tables),

    async applyChange(change: ChangeRecord) {
      checkChange(change);
      const started = performance.now();
      const base = { kind: change.op, type: change.type };
      try {
        const outcome = await db.transaction((tx) => applyChangeTx(tx, db.driver, tables, change), lock);
        const durationMs = performance.now() - started;
        notify(observer?.onMutation?.bind(observer), {
          ...base,
          durationMs,
          rowsAffected: outcome === 'applied' ? 1 : 0,
        });
        return outcome;
      } catch (err) {
        const durationMs = performance.now() - started;
        notify(observer?.onMutation?.bind(observer), { ...base, durationMs, rowsAffected: 0, error: errorLabel(err) });
        throw err;
      }
    },

    typeStats: () => typeStats(db, tables),
    storageStats: () => storageStats(db, tables),

    setReadOnly(reason: string | undefined) {
      readOnly = reason;
    },

    ping: () => db.ping(),

    async close() {
      if (options.ownsDatabase ?? true) await db.close();
    },
  };
}
