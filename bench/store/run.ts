/**
 * `npm run bench:store`: the entity store against bare SQL on the same backend, and replica lag.
 *
 * 1. Writes: N entity creates through `openEntityStore` (each its own transaction, change log
 *    included) versus N bare `INSERT`s of the same JSON into a plain table, on SQLite (sync
 *    NORMAL and FULL) and on PostgreSQL (skipped when unreachable), awaited one at a time and
 *    with 32 in flight.
 * 2. Reads: N `get` by id versus bare `SELECT ... WHERE id = $1`.
 * 3. Replica lag: a primary and a replica datastore process (configs/datastore.toml); a steady
 *    write load (BENCH_STORE_RATE creates/s over HTTP for BENCH_STORE_SECONDS) on the primary
 *    while the replica's `db_replication_lag_seconds` / `_changes` are sampled every 100 ms.
 *
 * Prints ratios (store / bare: time per operation) and the lag distribution. Figures vary with
 * the machine; the ratios are measured in one run. BENCH_STORE_LAG=0 skips part 3.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { openEntityStore, openSqlDatabase, type SqlDatabase, type SqlOptions } from '../../runtime/index.ts';
import { fmt, printTable } from '../common/report.ts';
import { freePort } from '../typed-proxy/children.ts';

const N = Number(process.env.BENCH_STORE_N ?? 2000);
const RATE = Number(process.env.BENCH_STORE_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_STORE_SECONDS ?? 10);
const PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-store-'));
const doc = (i: number) => ({
  name: `item ${i}`,
  description: 'a benchmark entity of ordinary size',
  rating: 1500 + (i % 100),
});

async function timed(n: number, inFlight: number, op: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await op(next++);
    }),
  );
  return Number(process.hrtime.bigint() - started) / 1e3 / n; // µs per operation
}

async function backend(label: string, options: SqlOptions, prefix: string): Promise<string[][]> {
  const bare: SqlDatabase = await openSqlDatabase(options);
  const store = await openEntityStore(await openSqlDatabase(options), { tablePrefix: `${prefix}e_` });
  const table = `${prefix}bare`;
  await bare.script(
    `CREATE TABLE IF NOT EXISTS ${table} (id ${options.driver === 'postgres' ? 'BIGSERIAL' : 'INTEGER'} PRIMARY KEY, type TEXT NOT NULL, data TEXT NOT NULL)`,
  );
  const rows: string[][] = [];
  try {
    for (const inFlight of [1, 32]) {
      const bareUs = await timed(N, inFlight, (i) =>
        bare.exec(`INSERT INTO ${table} (type, data) VALUES ($1, $2)`, ['item', JSON.stringify(doc(i))]),
      );
      const storeUs = await timed(N, inFlight, (i) => store.create('item', doc(i)));
      rows.push([label, `create, ${inFlight} in flight`, fmt(bareUs), fmt(storeUs), `${fmt(storeUs / bareUs, 2)}x`]);
    }
    const ids = (await store.query('item', { limit: 1000 })).items.map((e) => e.id);
    const bareIds = (await bare.query<{ id: number }>(`SELECT id FROM ${table} LIMIT 1000`)).map((r) => Number(r.id));
    const bareUs = await timed(N, 32, (i) =>
      bare.query(`SELECT data FROM ${table} WHERE id = $1`, [bareIds[i % bareIds.length] ?? 1]),
    );
    const storeUs = await timed(N, 32, (i) => store.get('item', ids[i % ids.length] ?? 1));
    rows.push([label, 'get by id, 32 in flight', fmt(bareUs), fmt(storeUs), `${fmt(storeUs / bareUs, 2)}x`]);
  } finally {
    if (options.driver === 'postgres') {
      for (const t of [table, `${prefix}e_entities`, `${prefix}e_changes`, `${prefix}e_meta`]) {
        await bare.exec(`DROP TABLE IF EXISTS ${t} CASCADE`).catch(() => {});
      }
    }
    await store.close();
    await bare.close();
  }
  return rows;
}

async function replicaLag(): Promise<void> {
  const children: ChildProcess[] = [];
  const start = async (name: string, env: Record<string, string>) => {
    const [port, metrics] = [await freePort(), await freePort()];
    const child = spawn(process.execPath, ['bin/switchyard.js', 'serve', 'configs/datastore.toml'], {
      env: {
        ...process.env,
        DB_SERVER_PORT: String(port),
        DB_METRICS_PORT: String(metrics),
        DB_STORAGE_PATH: join(dir, `${name}.db`),
        DB_LOGGING_LEVEL: 'warn',
        ...env,
      },
      stdio: 'ignore',
    });
    children.push(child);
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 300; i++) {
      const ok = await request(`${url}/health`)
        .then(async (r) => {
          await r.body.dump();
          return r.statusCode === 200;
        })
        .catch(() => false);
      if (ok) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return { url, metrics: `http://127.0.0.1:${metrics}/metrics` };
  };
  try {
    const bind = `127.0.0.1:${await freePort()}`;
    const primary = await start('primary', { DB_REPLICATION_ROLE: 'primary', DB_REPLICATION_BIND: bind });
    const replica = await start('replica', { DB_REPLICATION_ROLE: 'replica', DB_REPLICATION_PRIMARY: bind });
    // End-to-end lag: for every 10th write, the time from the primary's 201 until a read of
    // that id on the replica answers 200 (polled every 2 ms). And the replica's own gauges.
    const visibleMs: number[] = [];
    const gaugeChanges: number[] = [];
    let writing = true;
    const sampler = (async () => {
      while (writing) {
        const text = await (await request(replica.metrics)).body.text();
        gaugeChanges.push(Number(/^db_replication_lag_changes(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1] ?? 0));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const watch = async (id: number) => {
      const acked = performance.now();
      for (;;) {
        const res = await request(`${replica.url}/v1/entities/item/${id}`);
        await res.body.dump();
        if (res.statusCode === 200) return visibleMs.push(performance.now() - acked);
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    let sent = 0;
    const end = Date.now() + SECONDS * 1000;
    const interval = 1000 / RATE;
    let due = Date.now();
    const pending: Array<Promise<unknown>> = [];
    while (Date.now() < end) {
      const i = sent++;
      pending.push(
        request(`${primary.url}/v1/entities/item`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(doc(i)),
        }).then(async (r) => {
          const { id } = (await r.body.json()) as { id: number };
          if (i % 10 === 0) await watch(id);
        }),
      );
      due += interval;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await Promise.all(pending);
    writing = false;
    await sampler;
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const q = (xs: number[], p: number) => sorted(xs)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? 0;
    console.log(
      `\nreplica lag under a steady ${RATE} creates/s for ${SECONDS} s over HTTP (${sent} writes; SQLite, sync normal):`,
    );
    printTable(
      ['', 'p50', 'p99', 'max'],
      [
        [
          'write acked → visible on the replica, ms',
          fmt(q(visibleMs, 0.5)),
          fmt(q(visibleMs, 0.99)),
          fmt(Math.max(...visibleMs)),
        ],
        [
          'db_replication_lag_changes (every 100 ms)',
          fmt(q(gaugeChanges, 0.5), 0),
          fmt(q(gaugeChanges, 0.99), 0),
          fmt(Math.max(...gaugeChanges), 0),
        ],
      ],
    );
  } finally {
    for (const c of children) c.kill('SIGTERM');
  }
}

const rows = await backend(
  'sqlite normal',
  { driver: 'sqlite', path: join(dir, 'normal.db'), synchronous: 'NORMAL' },
  'b_',
);
rows.push(
  ...(await backend('sqlite full', { driver: 'sqlite', path: join(dir, 'full.db'), synchronous: 'FULL' }, 'b_')),
);
const pg = await openSqlDatabase({ driver: 'postgres', url: PG_URL, connect_timeout_ms: 2000 });
const pgUp = await pg.ping().then(
  () => true,
  () => false,
);
await pg.close();
if (pgUp) rows.push(...(await backend('postgres', { driver: 'postgres', url: PG_URL }, `bench_${process.pid}_`)));
else console.log(`PostgreSQL at ${PG_URL} unreachable: its rows are skipped`);
console.log(`entity store vs bare SQL, ${N} operations each (µs per operation, wall time):`);
printTable(['backend', 'operation', 'bare SQL µs', 'entity store µs', 'ratio'], rows);
if (process.env.BENCH_STORE_LAG !== '0') await replicaLag();
