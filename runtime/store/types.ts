/**
 * The SQL access layer's contract: one small interface over SQLite (better-sqlite3) and
 * PostgreSQL (pg), so that a plugin written against it runs on either by config alone.
 *
 * Placeholders are PostgreSQL's `$1, $2, ...` for both drivers (a number may repeat); the SQLite
 * driver rewrites them. Write portable SQL: `TEXT`, `BIGINT`, `INTEGER`, `LIMIT/OFFSET`,
 * `ON CONFLICT`, `RETURNING` all work on both.
 */

export type SqlParam = string | number | bigint | null | Buffer;

export type SqlRow = Record<string, unknown>;

/** Runs statements; inside a transaction, on the transaction's connection. */
export interface SqlExecutor {
  /**
   * Rows of a statement (a SELECT, or a write with RETURNING). Column types are the driver's:
   * PostgreSQL returns BIGINT and COUNT(*) as strings, SQLite as numbers: wrap them in Number().
   */
  query<T = SqlRow>(sql: string, params?: readonly SqlParam[]): Promise<T[]>;
  /** Runs a statement and resolves to the number of rows it changed. */
  exec(sql: string, params?: readonly SqlParam[]): Promise<number>;
}

export interface TransactionOptions {
  /**
   * Serialise this transaction with every other transaction given the same key, across
   * processes: PostgreSQL takes `pg_advisory_xact_lock(<key hashed to 64 bits>)` first (held until
   * commit or rollback). SQLite needs no key: every transaction is `BEGIN IMMEDIATE`, which takes
   * the database file's single write lock, so all SQLite writers are serialised anyway.
   */
  serialize?: string;
  /**
   * PostgreSQL: the longest a statement of this transaction waits for a lock (a row another
   * transaction wrote, a key it inserted, a table lock) before failing with SQLSTATE 55P03
   * `lock_not_available` (`SET LOCAL lock_timeout`, sent with BEGIN: no extra round trip).
   * SQLite ignores it.
   */
  lockTimeoutMs?: number;
  /**
   * Called once `fn` has resolved; the SQL it returns (statements without parameters: inline
   * values as literals, e.g. with `pgLiteral`) runs just before COMMIT — on PostgreSQL in the
   * same round trip as COMMIT (one simple query). For what must be written last, under a lock
   * held as briefly as possible: from it to the commit, no network round trip.
   */
  beforeCommit?: () => string | undefined;
}

export interface SqlDatabase extends SqlExecutor {
  readonly driver: 'sqlite' | 'postgres';
  /** Connections in the pool (PostgreSQL); undefined for a database that is not pooled (SQLite). */
  readonly poolSize?: number;
  /** Several statements without parameters (schema creation). */
  script(sql: string): Promise<void>;
  /**
   * Runs `fn` in one transaction: committed (durably, see the options) when `fn` resolves,
   * rolled back when it throws. Use only `tx` inside `fn`: calling the database itself from
   * inside would wait for the transaction to end (SQLite) or run outside it (PostgreSQL).
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Resolves when the database answers a trivial query; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface SqliteOptions {
  driver: 'sqlite';
  /** Database file; its directory must exist. */
  path: string;
  /**
   * `FULL` (default): a commit is on disk before it is acknowledged, power loss included.
   * `NORMAL`: in WAL mode, survives a process crash but may lose the last commits on power loss.
   */
  synchronous?: 'FULL' | 'NORMAL';
  /** How long a writer waits for another process's write lock before failing (default 15000 ms: long enough to ride out a busy machine). */
  busy_timeout_ms?: number;
  /** Page cache of each connection, in MiB (`PRAGMA cache_size`); SQLite's default is about 2 MiB. */
  cache_size_mb?: number;
}

export interface PostgresOptions {
  driver: 'postgres';
  /** Connection string, e.g. `postgres://user:password@127.0.0.1:5432/db`. */
  url: string;
  /** Connections in the pool (default 10). */
  pool_size?: number;
  /**
   * How long to wait for a connection before failing (default 5000 ms) with a `StorageBusyError`
   * (503 `storage_busy`, Retry-After).
   */
  connect_timeout_ms?: number;
}

export type SqlOptions = SqliteOptions | PostgresOptions;
