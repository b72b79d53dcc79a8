/**
 * The entity store's contract: typed JSON entities with a version on every row, optimistic
 * mutations, budgeted queries, relations expanded on read, and an ordered change log (what a
 * replica follows). It runs on the SQL access layer (types.ts), so SQLite and PostgreSQL behave
 * the same. Every stateful service keeps its data here; its metrics (`db_query_*`,
 * `db_mutation_*`) are how an operator watches them.
 */
import type { SqlDatabase } from './types.ts';

/** A stored entity. `data` is the caller's JSON object; the other fields are the store's. */
export interface Entity<T extends Record<string, unknown> = Record<string, unknown>> {
  /** Positive integer, unique across the whole store, never reused. */
  id: number;
  type: string;
  /** Optional caller-chosen key, unique per type (e.g. a pair "3:7"); null when not set. */
  key: string | null;
  /** 1 on create, +1 on every update. */
  version: number;
  /** ISO 8601 timestamps (UTC, millisecond precision). */
  created_at: string;
  updated_at: string;
  data: T;
}

/** A field condition. A field path is dotted (`stats.wins`) into `data`; `id`, `key`, `version`, `created_at`, `updated_at` name the store's own fields. */
export type FieldCondition =
  | { field: string; op: 'eq' | 'ne' | 'lt' | 'lte' | 'gt' | 'gte'; value: string | number | boolean | null }
  | { field: string; op: 'in'; value: Array<string | number> }
  /** Case-insensitive substring match on a string field. */
  | { field: string; op: 'contains'; value: string };

/** All conditions must hold (`all`), or at least one (`any`); nest freely. */
export type Filter = FieldCondition | { all: Filter[] } | { any: Filter[] };

export interface QueryOptions {
  filter?: Filter;
  /** Sort keys, first is primary; default `id` ascending. Ties always break on `id` ascending. */
  order?: Array<{ field: string; direction?: 'asc' | 'desc' }>;
  /** Rows to skip (default 0). */
  offset?: number;
  /** Rows to return (default and maximum: the store's `max_entities`). */
  limit?: number;
  /**
   * Relations to expand: a dotted path of reference fields, e.g. `['author', 'author.org']`.
   * A reference field holds an entity id (or an array of ids); expanded, the id is replaced
   * by the entity. Nesting deeper than `max_depth` is a budget error.
   */
  expand?: string[];
  /** Also return `total` (rows matching the filter, ignoring offset/limit). */
  count?: boolean;
  /** Who asked, for logs and the slow-query log (e.g. the request id). */
  requestId?: string;
}

export interface QueryResult<T extends Record<string, unknown> = Record<string, unknown>> {
  items: Entity<T>[];
  total?: number;
}

export interface MutationOptions {
  /** Expected current version; a different one is a `VersionConflictError`. */
  ifVersion?: number;
  requestId?: string;
}

/**
 * Reads and writes. Outside a transaction each call is atomic on its own; inside `transaction`
 * they share one SQL transaction.
 */
export interface EntityOperations {
  create<T extends Record<string, unknown>>(
    type: string,
    data: T,
    options?: { key?: string; requestId?: string },
  ): Promise<Entity<T>>;
  get<T extends Record<string, unknown>>(
    type: string,
    id: number,
    options?: { expand?: string[]; requestId?: string },
  ): Promise<Entity<T> | undefined>;
  getByKey<T extends Record<string, unknown>>(type: string, key: string): Promise<Entity<T> | undefined>;
  /** Several ids at once (missing ones are left out), in the order asked. */
  getMany<T extends Record<string, unknown>>(type: string, ids: readonly number[]): Promise<Entity<T>[]>;
  query<T extends Record<string, unknown>>(type: string, options?: QueryOptions): Promise<QueryResult<T>>;
  count(type: string, filter?: Filter): Promise<number>;
  /** Replaces `data` (merge yourself for a partial update); version +1. Undefined when the id does not exist. */
  update<T extends Record<string, unknown>>(
    type: string,
    id: number,
    data: T,
    options?: MutationOptions,
  ): Promise<Entity<T> | undefined>;
  /** Creates the entity with this key, or replaces the existing one's data (version +1). */
  upsertByKey<T extends Record<string, unknown>>(
    type: string,
    key: string,
    data: T,
    options?: MutationOptions,
  ): Promise<Entity<T>>;
  /** True when a row was deleted. */
  delete(type: string, id: number, options?: MutationOptions): Promise<boolean>;
}

export interface TransactionRunOptions {
  /**
   * Retries of the whole function after a `VersionConflictError` (or a PostgreSQL serialization
   * failure or deadlock) (default 0: reported to the caller). Each retry runs `fn` again from the
   * start on fresh reads; every conflict counts in `db_mutation_conflicts_total`.
   */
  retries?: number;
  /**
   * Run one at a time with every other `serialize` transaction of the store, across processes
   * (PostgreSQL: a lock taken at the start; SQLite serialises every transaction anyway). For a
   * transaction whose decision rests on rows it reads but does not write, e.g. "no user has this
   * email, so create one": version checks guard only the rows a transaction writes, so two such
   * transactions could otherwise both decide on the same state. Every writer whose decision
   * must see the other's needs it.
   */
  serialize?: boolean;
}

/** One entry of the ordered change log: what a replica applies, in `seq` order, exactly once. */
export interface ChangeRecord {
  /** Strictly increasing, gap-free within one store. */
  seq: number;
  op: 'create' | 'update' | 'delete';
  type: string;
  id: number;
  key: string | null;
  version: number;
  /** The entity's data after the change; null for a delete. */
  data: Record<string, unknown> | null;
  at: string;
}

export interface EntityStore extends EntityOperations {
  readonly driver: SqlDatabase['driver'];
  readonly limits: { maxEntities: number; maxDepth: number };
  /** Runs `fn` in one transaction; see `TransactionRunOptions.retries`. */
  transaction<R>(fn: (tx: EntityOperations) => Promise<R>, options?: TransactionRunOptions): Promise<R>;
  /** Change log entries with `seq > afterSeq`, oldest first, at most `limit` (default 1000). */
  changesSince(afterSeq: number, limit?: number): Promise<ChangeRecord[]>;
  /** Highest `seq` written (0 when none). */
  lastSeq(): Promise<number>;
  /**
   * Applies a primary's change (replica side), idempotently: a record with `seq` at or below the
   * last applied one is skipped. Keeps the primary's ids, versions and seq.
   */
  applyChange(change: ChangeRecord): Promise<'applied' | 'skipped'>;
  /** Entity count and approximate stored bytes per type (for `db_entity_*` gauges). */
  typeStats(): Promise<Array<{ type: string; count: number; bytes: number }>>;
  /** Data, index and WAL sizes in bytes (what the driver can tell; undefined when unknown). */
  storageStats(): Promise<{ dataBytes?: number; indexBytes?: number; walBytes?: number }>;
  /** Refuses every mutation with a `ReadOnlyStoreError` carrying `reason` (a replica). */
  setReadOnly(reason: string | undefined): void;
  ping(): Promise<void>;
  close(): Promise<void>;
  /** The SQL database underneath (for plugins that keep their own tables next to the entities). */
  readonly sql: SqlDatabase;
}

export interface EntityStoreOptions {
  /** `query.max_entities`: most entities one query may return plus expand (default 10000). */
  maxEntities?: number;
  /** `query.max_depth`: deepest relation expansion (default 3). */
  maxDepth?: number;
  /**
   * Fields to index per type, for filters and sorts on large sets
   * (e.g. `{ item: ['rating'] }` makes a leaderboard an index scan).
   */
  indexes?: Record<string, string[]>;
  /** Told about every query and mutation (metrics, slow-query log). */
  observer?: EntityStoreObserver;
  /**
   * PostgreSQL: writing transactions run at once (default: the pool size less 2, at least 1, so
   * that reads always find a connection). The others wait in the process, in arrival order.
   */
  maxConcurrentWrites?: number;
  /** PostgreSQL: longest wait for a write slot before a `StorageBusyError` (default 30000 ms). */
  writeQueueTimeoutMs?: number;
  /** Close the SQL database when the store closes (default true). */
  ownsDatabase?: boolean;
  /**
   * Prefix of the store's table names (default `entity_`: `entity_entities`, `entity_changes`,
   * `entity_meta`), so that several stores can share one database. `[A-Za-z_][A-Za-z0-9_]*`, at
   * most 40 characters.
   */
  tablePrefix?: string;
}

export interface QueryEvent {
  kind: 'get' | 'query' | 'count';
  type: string;
  /** Query shape without values, e.g. `query item filter(name contains) order(rating desc)`. */
  shape: string;
  durationMs: number;
  rowsReturned: number;
  entitiesScanned: number;
  requestId?: string;
  error?: string;
}

export interface MutationEvent {
  kind: 'create' | 'update' | 'upsert' | 'delete';
  type: string;
  durationMs: number;
  rowsAffected: number;
  requestId?: string;
  error?: string;
}

export interface EntityStoreObserver {
  onQuery?(event: QueryEvent): void;
  onMutation?(event: MutationEvent): void;
  onConflict?(event: { type: string; id: number; expected: number; actual: number | undefined }): void;
  onBudgetExceeded?(event: {
    budget: 'max_entities' | 'max_depth';
    type: string;
    limit: number;
    requested: number;
  }): void;
}
