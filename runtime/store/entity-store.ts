/**
 * The entity store (contract in entity-types.ts) on the SQL access layer: one implementation for
 * SQLite and PostgreSQL.
 *
 *   const store = await openEntityStore(db, { indexes: { item: ['rating'] } });
 *   await store.transaction(async (tx) => { ... }, { retries: 5 });
 *
 * Concurrency. On SQLite every writing transaction holds the database's write lock from its
 * start (BEGIN IMMEDIATE), so writers run one at a time. On PostgreSQL writers run concurrently:
 * row locks and version checks (entity-ops.ts) order conflicting writes, a stale version is a
 * `VersionConflictError` (retried by `transaction(fn, {retries})`), and only the change log is
 * serialised, by a lock taken at the end of the transaction, just before COMMIT
 * (entity-changelog.ts). At most `maxConcurrentWrites` writing transactions run at once; the
 * others wait in this process (entity-queue.ts). A transaction with `{serialize: true}` also
 * takes a lock of its own at its start, so such transactions run one at a time.
 *
 * Inside `transaction(fn)`, use only the `tx` given to `fn`: calling the store itself from inside
 * waits for the transaction to end on SQLite (deadlock) and runs outside it on PostgreSQL.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  applyChange,
  changesSince,
  changesSql,
  insertChanges,
  lastSeq,
  type PendingChange,
} from './entity-changelog.ts';
import { InvalidQueryError, StorageBusyError, VersionConflictError, WriteConflictError } from './entity-errors.ts';
import { type Access, entityOperations, errorLabel, type LogChange, notify, type StoreContext } from './entity-ops.ts';
import { createWriteQueue } from './entity-queue.ts';
import { createEntitySchema, entityTables } from './entity-schema.ts';
import { storageStats, typeStats } from './entity-stats.ts';
import type {
  ChangeRecord,
  EntityOperations,
  EntityStore,
  EntityStoreOptions,
  TransactionRunOptions,
} from './entity-types.ts';
import type { SqlDatabase, SqlExecutor, TransactionOptions } from './types.ts';

const DEFAULT_MAX_ENTITIES = 10_000;
const DEFAULT_MAX_DEPTH = 3;
const DEFAULT_WRITE_QUEUE_TIMEOUT_MS = 30_000;
const MAX_CHANGES_PAGE = 10_000;
const CHANGE_OPS = new Set(['create', 'update', 'delete']);

/**
 * PostgreSQL's "try again" failures: serialization_failure, deadlock_detected, and
 * lock_not_available (an optimistic attempt that would have waited for a row lock).
 */
const RETRYABLE_PG_CODES = new Set(['40001', '40P01', '55P03']);

/**
 * Lock timeout of a transaction's optimistic first attempt (PostgreSQL). Waiting for a row that
 * another transaction wrote would almost always end in a version conflict once it commits; and
 * waiting while holding rows of one's own is how deadlocks form (detected only after a second).
 * So the attempt gives up at once and is retried holding the rows it reads (lockRows).
 */
const OPTIMISTIC_LOCK_TIMEOUT_MS = 1;

function pgRetryable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && RETRYABLE_PG_CODES.has(code);
}

/**
 * query_canceled (57014): a statement_timeout, a cancel request (pg_cancel_backend), or — with a
 * lock_timeout as short as OPTIMISTIC_LOCK_TIMEOUT_MS — a lock timeout misreported by PostgreSQL
 * ("canceling statement due to user request": seen 2 times in 20,000 contended attempts, 17,500
 * of them lock timeouts, on PostgreSQL 15; the timeout seems to fire as one lock wait of the
 * statement ends and to be reported by its next). Nothing of the transaction was written.
 */
function pgCancelled(err: unknown): boolean {
  return (err as { code?: unknown })?.code === '57014';
}

/** A cancelled statement as a 503 the client may retry (Retry-After), not a 500. */
function cancelledAsBusy(err: unknown): unknown {
  return pgCancelled(err) ? new StorageBusyError('the database cancelled the statement (57014)', err) : err;
}

async function mapCancel<T>(run: Promise<T>): Promise<T> {
  try {
    return await run;
  } catch (err) {
    throw cancelledAsBusy(err);
  }
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

  // PostgreSQL: writers beyond the pool's size (less two connections kept for reads) wait here.
  // SQLite serialises every transaction of the process already (sqlite.ts).
  const queue =
    db.driver === 'postgres'
      ? createWriteQueue(
          positiveInt(options.maxConcurrentWrites, Math.max(1, (db.poolSize ?? 10) - 2), 'maxConcurrentWrites'),
          positiveInt(options.writeQueueTimeoutMs, DEFAULT_WRITE_QUEUE_TIMEOUT_MS, 'writeQueueTimeoutMs'),
        )
      : undefined;
  const queued = <T>(fn: () => Promise<T>): Promise<T> => (queue ? queue.run(fn) : fn());

  /**
   * One writing transaction: `fn` runs with a `log` that buffers the change records of its
   * mutations; they are written after it, just before COMMIT (PostgreSQL: with the COMMIT, in
   * one round trip, taking the log lock; see entity-changelog.ts).
   */
  const writing = <T>(fn: (tx: SqlExecutor, log: LogChange) => Promise<T>, sqlOptions?: TransactionOptions) => {
    const changes: PendingChange[] = [];
    const log: LogChange = (change) => changes.push(change);
    if (db.driver === 'postgres') {
      return db.transaction((tx) => fn(tx, log), { ...sqlOptions, beforeCommit: () => changesSql(tables, changes) });
    }
    return db.transaction(async (tx) => {
      const result = await fn(tx, log);
      await insertChanges(tx, tables, changes);
      return result;
    }, sqlOptions);
  };

  const direct = entityOperations(ctx, {
    read: (fn) => mapCancel(fn(db)),
    write: (fn) => mapCancel(queued(() => writing(fn))),
  });

  /**
   * How attempt `n` of a transaction runs. A `serialize` one takes its lock first (another key
   * than the log lock's, so it orders before row locks and the log lock). Otherwise the first
   * attempt is optimistic: it locks nothing it reads, and gives up at once rather than wait for a
   * row lock when a retry is left (OPTIMISTIC_LOCK_TIMEOUT_MS); the retries hold the rows they read.
   */
  const attemptMode = (n: number, retries: number, serialize: boolean) => ({
    lockRows: n > 0,
    sqlOptions: serialize
      ? { serialize: tables.serialKey }
      : n === 0 && retries > 0
        ? { lockTimeoutMs: OPTIMISTIC_LOCK_TIMEOUT_MS }
        : undefined,
  });

  /** One attempt of `fn` in a transaction; its `tx` stops working when the attempt ends. */
  const attempt = <R>(fn: (tx: EntityOperations) => Promise<R>, mode: ReturnType<typeof attemptMode>) =>
    writing(async (sqlTx, log) => {
      let open = true;
      const use = <T>(run: (ex: SqlExecutor) => Promise<T>) => {
        if (!open) return Promise.reject(new Error('the transaction is over: use tx only inside its function'));
        return run(sqlTx);
      };
      const access: Access = {
        read: use,
        write: (run) => use((ex) => run(ex, log)),
        seen: new Map(),
        freeKeys: new Set(),
        lockRows: mode.lockRows,
      };
      try {
        return await fn(entityOperations(ctx, access));
      } finally {
        open = false;
      }
    }, mode.sqlOptions);

  return {
    driver: db.driver,
    limits,
    sql: db,
    ...direct,

    async transaction<R>(fn: (tx: EntityOperations) => Promise<R>, runOptions: TransactionRunOptions = {}) {
      const retries = runOptions.retries ?? 0;
      // One place in the write queue for all attempts: a retry does not go to the back.
      return queued(async () => {
        for (let n = 0; ; n++) {
          const mode = attemptMode(n, retries, runOptions.serialize ?? false);
          try {
            return await attempt(fn, mode);
          } catch (err) {
            // A 57014 in an attempt under our own lock_timeout is most likely that timeout.
            const optimistic = mode.sqlOptions?.lockTimeoutMs !== undefined;
            const again = err instanceof VersionConflictError || pgRetryable(err) || (optimistic && pgCancelled(err));
            if (again && n < retries) {
              // A little jitter so that retries of colliding writers do not collide again.
              await sleep(Math.random() * Math.min(2 ** n, 20));
              continue;
            }
            // Out of retries after a deadlock or the like: a 409 the client can retry, not a 500.
            if (pgRetryable(err)) throw new WriteConflictError(err);
            throw cancelledAsBusy(err);
          }
        }
      });
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
        const outcome = await queued(() => applyChange(db, tables, change));
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
