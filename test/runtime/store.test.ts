/**
 * The SQL access layer on both drivers: `$n` placeholders, transactions (commit, rollback) and
 * serialised read-modify-write across independent connections, as separate processes would have.
 * PostgreSQL at 127.0.0.1:5432 (database `test`): required when CI=true, else skipped with the
 * reason shown. Each run uses its own table and drops it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqlDatabase, type SqlDatabase, type SqlOptions } from '../../runtime/index.ts';
import { toPositional } from '../../runtime/store/sqlite.ts';
import { PG_URL, tcpReachable } from '../helpers/reachable.ts';

const pgUp = await tcpReachable(5432);
const skipPg = !pgUp && process.env.CI !== 'true';
if (skipPg) console.warn('PostgreSQL store tests skipped: nothing at 127.0.0.1:5432');

const dir = mkdtempSync(join(tmpdir(), 'sy-store-'));
const table = `store_test_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
const opened: SqlDatabase[] = [];
afterAll(async () => {
  for (const db of opened.splice(0)) await db.close();
  if (pgUp) {
    const db = await openSqlDatabase({ driver: 'postgres', url: PG_URL });
    await db.exec(`DROP TABLE IF EXISTS ${table}`);
    await db.close();
  }
});

describe('placeholder rewriting for SQLite', () => {
  it('turns $n into ? in order of appearance, repeats included, and leaves literals alone', () => {
    expect(toPositional(`SELECT * FROM t WHERE a = $2 AND b = '$1' AND "c$1" = $1 OR d = $2`)).toEqual({
      text: `SELECT * FROM t WHERE a = ? AND b = '$1' AND "c$1" = ? OR d = ?`,
      order: [1, 0, 1],
    });
  });
});

const drivers: Array<{ name: string; skip: boolean; options: () => SqlOptions }> = [
  { name: 'sqlite', skip: false, options: () => ({ driver: 'sqlite', path: join(dir, 'store.db') }) },
  { name: 'postgres', skip: skipPg, options: () => ({ driver: 'postgres', url: PG_URL, pool_size: 4 }) },
];

describe.each(drivers)('$name', ({ name, skip, options }) => {
  const open = async () => {
    const db = await openSqlDatabase(options());
    opened.push(db);
    return db;
  };

  it.skipIf(skip)('runs parameterised statements and reports changed rows', async () => {
    const db = await open();
    expect(db.driver).toBe(name);
    await db.script(`CREATE TABLE IF NOT EXISTS ${table} (k TEXT PRIMARY KEY, n BIGINT NOT NULL)`);
    expect(await db.exec(`INSERT INTO ${table} (k, n) VALUES ($1, $2), ($3, $2)`, ['a', 1, 'b'])).toBe(2);
    const rows = await db.query<{ k: string; n: number | string }>(
      `SELECT k, n FROM ${table} WHERE n = $1 ORDER BY k`,
      [1],
    );
    expect(rows.map((r) => [r.k, Number(r.n)])).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
    await db.ping();
  });

  it.skipIf(skip)('commits a transaction that resolves and rolls back one that throws', async () => {
    const db = await open();
    await db.transaction(async (tx) => {
      await tx.exec(`INSERT INTO ${table} (k, n) VALUES ($1, $2)`, ['committed', 1]);
    });
    await expect(
      db.transaction(async (tx) => {
        await tx.exec(`INSERT INTO ${table} (k, n) VALUES ($1, $2)`, ['rolled-back', 1]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const keys = (await db.query<{ k: string }>(`SELECT k FROM ${table}`)).map((r) => r.k);
    expect(keys).toContain('committed');
    expect(keys).not.toContain('rolled-back');
  });

  it.skipIf(skip)('serialises read-modify-write transactions across connections: no lost update', async () => {
    const [a, b] = [await open(), await open()];
    await a.exec(`INSERT INTO ${table} (k, n) VALUES ($1, 0)`, ['counter']);
    const increment = (db: SqlDatabase) =>
      db.transaction(
        async (tx) => {
          const [row] = await tx.query<{ n: number | string }>(`SELECT n FROM ${table} WHERE k = $1`, ['counter']);
          await new Promise((r) => setImmediate(r)); // give the other connection every chance to interleave
          await tx.exec(`UPDATE ${table} SET n = $1 WHERE k = $2`, [Number(row!.n) + 1, 'counter']);
        },
        { serialize: `${table}:counter` },
      );
    await Promise.all(Array.from({ length: 40 }, (_, i) => increment(i % 2 ? a : b)));
    const [row] = await a.query<{ n: number | string }>(`SELECT n FROM ${table} WHERE k = $1`, ['counter']);
    expect(Number(row!.n)).toBe(40);
  });

  it.skipIf(skip)('ping fails once closed', async () => {
    const db = await openSqlDatabase(options());
    await db.close();
    await expect(db.ping()).rejects.toThrow();
  });
});
