/**
 * PostgreSQL driver (pg Pool). Commits are durable when acknowledged with the server's default
 * `synchronous_commit = on`. A serialised transaction first takes a transaction-level advisory
 * lock, so that every process using the same key runs that transaction one at a time.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { PostgresOptions, SqlDatabase, SqlExecutor, SqlParam } from './types.ts';

/** The 64-bit advisory lock key of a name: the first 8 bytes of its SHA-256, as a signed bigint. */
export function advisoryKey(name: string): string {
  const digest = createHash('sha256').update(name).digest();
  return digest.readBigInt64BE(0).toString();
}

type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

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
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.pool_size ?? 10,
    connectionTimeoutMillis: options.connect_timeout_ms ?? 5000,
  });
  // An idle connection that breaks (server restart) emits here; without a listener the process
  // would crash. The pool drops it and the next query opens a new one.
  pool.on('error', () => {});
  const direct = executor(pool);

  return {
    driver: 'postgres',
    ...direct,
    async script(sql) {
      await pool.query(sql);
    },
    async transaction(fn, txOptions) {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        if (txOptions?.serialize) {
          await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryKey(txOptions.serialize)]);
        }
        const result = await fn(executor(client));
        await client.query('COMMIT');
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
      await pool.query('SELECT 1');
    },
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
}
