/**
 * SQL access layer: `openSqlDatabase` opens SQLite (embedded default) or PostgreSQL (shared by
 * several gateway processes) behind one small interface (see types.ts). Plugins reach it through
 * runtime/index.ts.
 *
 *   const db = await openSqlDatabase({ driver: 'sqlite', path: '/var/lib/switchyard/x.db' });
 *   const db = await openSqlDatabase({ driver: 'postgres', url: 'postgres://127.0.0.1/app' });
 *   await db.transaction(async (tx) => { ... }, { serialize: 'my-appender' });
 */
import { openPostgres } from './postgres.ts';
import { openSqlite } from './sqlite.ts';
import type { SqlDatabase, SqlOptions } from './types.ts';

export {
  DuplicateKeyError,
  InvalidQueryError,
  type QueryBudget,
  QueryBudgetExceededError,
  ReadOnlyStoreError,
  ReplicationGapError,
  StorageBusyError,
  VersionConflictError,
  WriteConflictError,
} from './entity-errors.ts';
export { openEntityStore } from './entity-store.ts';
export type {
  ChangeRecord,
  Entity,
  EntityOperations,
  EntityStore,
  EntityStoreObserver,
  EntityStoreOptions,
  FieldCondition,
  Filter,
  MutationEvent,
  MutationOptions,
  QueryEvent,
  QueryOptions,
  QueryResult,
  TransactionRunOptions,
} from './entity-types.ts';

export type {
  PostgresOptions,
  SqlDatabase,
  SqlExecutor,
  SqliteOptions,
  SqlOptions,
  SqlParam,
  SqlRow,
  TransactionOptions,
} from './types.ts';

/**
 * Opens a database. SQLite opens (and creates) the file at once; PostgreSQL connects lazily,
 * so a server that is down shows in `ping()` and in the first query, not here.
 */
export async function openSqlDatabase(options: SqlOptions): Promise<SqlDatabase> {
  if (options.driver === 'sqlite') return openSqlite(options);
  if (options.driver === 'postgres') return openPostgres(options);
  throw new Error(`unknown SQL driver "${(options as { driver: unknown }).driver}"`);
}
