/**
 * PostgreSQL driver (pg Pool). Commits are durable when acknowledged with the server's default
 * `synchronous_commit = on`. A serialised transaction first takes a transaction-level advisory
 * lock, so that every process using the same key runs that transaction one at a time.
 *
 * A pool that hands out no connection within `connect_timeout_ms` (all busy, or a new one not
 * established in time) fails with `StorageBusyError` (503 `storage_busy`, Retry-After), not
 * with pg's plain Error (which would be a 500).
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { StorageBusyError } from './entity-errors.ts';
import type { PostgresOptions, SqlDatabase, SqlExecutor, SqlParam } from './types.ts';

/** The 64-bit advisory lock key of a name: the first 8 bytes of its SHA-256, as a signed bigint. */
export function advisoryKey(name: string): string {
  const digest = createHash('sha256').update(name).digest();
  return digest.readBigInt64BE(0).toString();
}

/**
 * A string as a PostgreSQL literal, for SQL sent without parameters (`beforeCommit`). The
 * `E'...'` form with backslashes and quotes doubled reads the same whatever
 * `standard_conforming_strings` is.
 */
export function pgLiteral(value: string): string {
  return `E'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

/** pg-pool's messages for "no connection in time": waiting for a free one, or opening a new one. */
const POOL_TIMEOUTS = new Set([
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
]);

/** A pool timeout as a StorageBusyError; anything else as it is. */
function busy(err: unknown): unknown {
  const message = (err as { message?: unknown })?.message;
  if (typeof message === 'string' && POOL_TIMEOUTS.has(message)) {
    return new StorageBusyError(`no database connection became free in time (${message})`, err);
  }
  return err;
}

/** Runs a pool-level call, turning a pool timeout into a StorageBusyError. */
async function pooled<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw busy(err);
  }
}

function executor(conn: Queryable): SqlExecutor {
  return {
    async query<T>(sql: string, params?: readonly SqlParam[]) {
      const result = await conn.query(sql, params as unknown[] | undefined);
      return result.rows as T[];
    },
    async exec(sql, params) {
      const result = await conn.query(sql, params as unknown[] | undefined);
      return result.rowCount ?? 0;
    },
  };
}

export function openPostgres(options: PostgresOptions): SqlDatabase {
  const poolSize = options.pool_size ?? 10;
  const pool = new pg.Pool({
    connectionString: options.url,
    max: poolSize,
    connectionTimeoutMillis: options.connect_timeout_ms ?? 5000,
  });
  // An idle connection that breaks (server restart) emits here; without a listener the process
  // would crash. The pool drops it and the next query opens a new one.
  pool.on('error', () => {});
  const direct = executor(pool);

  return {
    driver: 'postgres',
    poolSize,
    query: (sql, params) => pooled(() => direct.query(sql, params)),
    exec: (sql, params) => pooled(() => direct.exec(sql, params)),
    async script(sql) {
      await pooled(() => pool.query(sql));
    },
    async transaction(fn, txOptions) {
      const client = await pooled(() => pool.connect());
      let broken: Error | undefined;
      try {
        const timeout = txOptions?.lockTimeoutMs;
        if (timeout !== undefined && !(Number.isSafeInteger(timeout) && timeout >= 0)) {
          throw new Error('lockTimeoutMs must be a non-negative integer');
        }
        // Without parameters pg sends a simple query, which may hold two statements.
        await client.query(timeout === undefined ? 'BEGIN' : `BEGIN; SET LOCAL lock_timeout = ${timeout}`);
        if (txOptions?.serialize) {
          await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryKey(txOptions.serialize)]);
        }
        const result = await fn(executor(client));
        const last = txOptions?.beforeCommit?.();
        await client.query(last ? `${last};\nCOMMIT` : 'COMMIT');
        return result;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackErr) {
          broken = rollbackErr as Error; // the connection is unusable: destroy it, not reuse it
        }
        throw err;
      } finally {
        client.release(broken);
      }
    },
    async ping() {
      await pooled(() => pool.query('SELECT 1'));
    },
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
}
