/**
 * `npx tsx bench/ranking/run.ts`: the ranking service (configs/ranking.yaml) in two parts.
 *
 * 1. Write throughput, per backend (SQLite; PostgreSQL when reachable): comparisons per second
 *    through HTTP (`POST /comparisons/`: Elo update of two entities, bandit state and the
 *    comparison record, one transaction) against the same number of bare single-row INSERTs on
 *    that backend (the floor of one durable write), both at the same concurrency. Ratio =
 *    service rate ÷ bare rate.
 * 2. Read latency at scale: 100,000 entities and 1,000,000 comparisons (ratings replayed in
 *    memory, then written through the entity store in bulk transactions, with their bandit
 *    state), then p50/p99 of the leaderboard (top 100, and all of it), the UCB suggestion and the
 *    similarity suggestion, each against the store call of the same shape made directly
 *    (ratio = HTTP ÷ direct). SQLite by default; BENCH_LATENCY_BACKENDS=sqlite,postgres adds
 *    PostgreSQL (its bulk seeding takes about 20 minutes at full scale).
 *
 * Settings: BENCH_COMPARISONS (2000), BENCH_CONCURRENCY (16), BENCH_ENTITIES_SMALL (100),
 * BENCH_SCALE_ENTITIES (100000), BENCH_SCALE_COMPARISONS (1000000), BENCH_SAMPLES (50),
 * BENCH_BACKENDS (sqlite,postgres), BENCH_LATENCY_BACKENDS (sqlite), BENCH_PG_URL,
 * BENCH_KEEP_LOGS=1. Writes bench/results/ranking-<timestamp>.json.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { pairKey } from '../../plugins/elo/api.ts';
import { eloUpdate } from '../../plugins/elo/elo.ts';
import { type EntityStore, openEntityStore, openSqlDatabase, type SqlDatabase } from '../../runtime/index.ts';
import { dropEntitySchema } from '../../runtime/store/entity-schema.ts';
import { envNum, runBench, waitUntilReady } from '../common/harness.ts';
import { fmt, machine, printTable, writeResults } from '../common/report.ts';
import { freePort, type Started, start, stop } from '../typed-proxy/children.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const list = (name: string, def: string) =>
  (process.env[name] ?? def)
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
const settings = {
  comparisons: envNum('BENCH_COMPARISONS', 2000),
  concurrency: envNum('BENCH_CONCURRENCY', 16),
  smallEntities: envNum('BENCH_ENTITIES_SMALL', 100),
  scaleEntities: envNum('BENCH_SCALE_ENTITIES', 100_000),
  scaleComparisons: envNum('BENCH_SCALE_COMPARISONS', 1_000_000),
  samples: envNum('BENCH_SAMPLES', 50),
  backends: list('BENCH_BACKENDS', 'sqlite,postgres'),
  latencyBackends: list('BENCH_LATENCY_BACKENDS', 'sqlite'),
  pgUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  keepLogs: process.env.BENCH_KEEP_LOGS === '1',
};
const logDir = mkdtempSync(join(tmpdir(), 'bench-ranking-'));
/** Must match configs/ranking.yaml, so that the seeded store is the one the service opens. */
const indexes = {
  entity: ['comparisons', 'rating'],
  comparison: ['entity1_id', 'entity2_id'],
  pair_state: ['entity1_id', 'entity2_id'],
};

type Driver = 'sqlite' | 'postgres';
interface Target {
  driver: Driver;
  dbPath: string;
  prefix: string;
}

const newTarget = (driver: Driver): Target => ({
  driver,
  dbPath: join(logDir, `ranking-${randomUUID().slice(0, 8)}.db`),
  prefix: `bench_${randomUUID().replace(/-/g, '').slice(0, 10)}_`,
});

async function openDb(t: Target): Promise<SqlDatabase> {
  return t.driver === 'sqlite'
    ? openSqlDatabase({ driver: 'sqlite', path: t.dbPath, synchronous: 'FULL' })
    : openSqlDatabase({ driver: 'postgres', url: settings.pgUrl, pool_size: 10 });
}

async function pgReachable(): Promise<boolean> {
  const db = await openSqlDatabase({ driver: 'postgres', url: settings.pgUrl, connect_timeout_ms: 2000 });
  try {
    await db.ping();
    return true;
  } catch {
    return false;
  } finally {
    await db.close();
  }
}

/** The service as its own process, on free ports, LOG_LEVEL=warn. */
async function startRanking(t: Target): Promise<{ s: Started; base: string; pool: Pool }> {
  const port = await freePort();
  const metrics = await freePort();
  const s = start(
    process.execPath,
    [
      'bin/switchyard.js',
      'serve',
      'configs/ranking.yaml',
      '--set',
      `listen.port=${port}`,
      '--set',
      `metrics.port=${metrics}`,
    ],
    {
      cwd: root,
      logFile: join(logDir, `service-${t.prefix}.log`),
      env: {
        ...process.env,
        LOG_LEVEL: 'warn',
        AUTH_ENABLED: 'false',
        RANK_DB_DRIVER: t.driver,
        RANK_DB_PATH: t.dbPath,
        RANK_DB_URL: settings.pgUrl,
        RANK_DB_PREFIX: t.prefix,
      },
    },
  );
  const base = `http://127.0.0.1:${port}`;
  const pool = new Pool(base, { connections: 64 });
  await waitUntilReady(s, 'ranking', 60_000, async () => {
    const r = await pool.request({ method: 'GET', path: '/health/ready' });
    await r.body.dump();
    if (r.statusCode !== 200) throw new Error(`ready: ${r.statusCode}`);
  });
  return { s, base, pool };
}

async function call(pool: Pool, method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
  const r = await pool.request({
    method,
    path,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${method} ${path}: ${r.statusCode} ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

/** Runs `n` jobs with `concurrency` workers; the elapsed seconds. */
async function closedLoop(n: number, concurrency: number, job: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await job(next++);
    }),
  );
  return (performance.now() - started) / 1000;
}

/** A deterministic PRNG (LCG) so that every run compares the same pairs. */
function lcg(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

async function throughput(driver: Driver) {
  const t = newTarget(driver);
  const svc = await startRanking(t);
  try {
    const ids: number[] = [];
    for (let i = 0; i < settings.smallEntities; i++) {
      ids.push(
        (
          (await call(svc.pool, 'POST', '/entities/', { name: `item ${i}`, description: `bench item ${i}` })) as {
            id: number;
          }
        ).id,
      );
    }
    const rand = lcg(7);
    const bodies = Array.from({ length: settings.comparisons }, () => {
      const a = Math.floor(rand() * ids.length);
      const b = (a + 1 + Math.floor(rand() * (ids.length - 1))) % ids.length;
      return { entity1_id: ids[a], entity2_id: ids[b], selected_entity_id: rand() < 0.5 ? ids[a] : ids[b] };
    });
    const httpSeconds = await closedLoop(bodies.length, settings.concurrency, (i) =>
      call(svc.pool, 'POST', '/comparisons/', bodies[i]),
    );

    // Bare inserts: one autocommitted row per comparison, same backend, same durability.
    const db = await openDb(t);
    const table = `bench_bare_${randomUUID().replace(/-/g, '').slice(0, 10)}`;
    const idColumn = driver === 'sqlite' ? 'INTEGER PRIMARY KEY AUTOINCREMENT' : 'BIGSERIAL PRIMARY KEY';
    await db.script(
      `CREATE TABLE ${table} (id ${idColumn}, entity1_id BIGINT NOT NULL, entity2_id BIGINT NOT NULL, selected_entity_id BIGINT NOT NULL, created_at TEXT NOT NULL)`,
    );
    const bareSeconds = await closedLoop(bodies.length, settings.concurrency, (i) =>
      db.exec(`INSERT INTO ${table} (entity1_id, entity2_id, selected_entity_id, created_at) VALUES ($1, $2, $3, $4)`, [
        bodies[i]!.entity1_id!,
        bodies[i]!.entity2_id!,
        bodies[i]!.selected_entity_id!,
        new Date().toISOString(),
      ]),
    );
    await db.exec(`DROP TABLE ${table}`);
    await db.close();
    const http = bodies.length / httpSeconds;
    const bare = bodies.length / bareSeconds;
    return {
      driver,
      comparisons: bodies.length,
      concurrency: settings.concurrency,
      http_per_s: http,
      bare_per_s: bare,
      ratio: http / bare,
    };
  } finally {
    await svc.pool.close();
    await stop(svc.s.child);
    await cleanup(t);
  }
}

async function cleanup(t: Target): Promise<void> {
  if (t.driver !== 'postgres') return;
  const db = await openDb(t);
  await dropEntitySchema(db, t.prefix);
  await db.close();
}

/** Writes N entities and M comparisons (ratings replayed in memory) with their bandit state, in bulk. */
async function seed(store: EntityStore, entities: number, comparisons: number): Promise<number> {
  const started = performance.now();
  const batch = async <T>(
    items: T[],
    size: number,
    write: (tx: Parameters<Parameters<EntityStore['transaction']>[0]>[0], item: T) => Promise<unknown>,
  ) => {
    for (let i = 0; i < items.length; i += size) {
      await store.transaction(async (tx) => {
        for (const item of items.slice(i, i + size)) await write(tx, item);
      });
    }
  };
  const rand = lcg(11);
  const first = new Int32Array(comparisons);
  const second = new Int32Array(comparisons);
  const firstWins = new Uint8Array(comparisons);
  const rating = new Float64Array(entities).fill(1500);
  const count = new Int32Array(entities);
  for (let c = 0; c < comparisons; c++) {
    const a = Math.floor(rand() * entities);
    const b = (a + 1 + Math.floor(rand() * (entities - 1))) % entities;
    const aWins = rand() < 0.5 ? 1 : 0;
    first[c] = a;
    second[c] = b;
    firstWins[c] = aWins;
    [rating[a], rating[b]] = eloUpdate(rating[a]!, rating[b]!, aWins);
    count[a]!++;
    count[b]!++;
  }
  const ids = new Int32Array(entities);
  const words = ['red', 'blue', 'green', 'sweet', 'salty', 'fast', 'slow', 'old', 'new', 'small', 'large', 'round'];
  await batch(
    Array.from({ length: entities }, (_, i) => i),
    5000,
    async (tx, i) => {
      const name = `${words[i % 12]} ${words[(i * 7) % 12]} item ${i}`;
      const e = await tx.create('entity', {
        name,
        description: `${words[(i * 5) % 12]} thing`,
        image_urls: [],
        rating: rating[i],
        comparisons: count[i],
      });
      ids[i] = e.id;
    },
  );
  await batch(
    Array.from({ length: comparisons }, (_, c) => c),
    5000,
    (tx, c) => {
      const a = ids[first[c]!]!;
      const b = ids[second[c]!]!;
      return tx.create('comparison', { entity1_id: a, entity2_id: b, selected_entity_id: firstWins[c] ? a : b });
    },
  );
  const pairs = new Map<
    string,
    { entity1_id: number; entity2_id: number; comparisons: number; entity1_wins: number; entity2_wins: number }
  >();
  for (let c = 0; c < comparisons; c++) {
    const a = ids[first[c]!]!;
    const b = ids[second[c]!]!;
    const key = pairKey(a, b);
    const lo = Math.min(a, b);
    const p = pairs.get(key) ?? {
      entity1_id: lo,
      entity2_id: Math.max(a, b),
      comparisons: 0,
      entity1_wins: 0,
      entity2_wins: 0,
    };
    const winner = firstWins[c] ? a : b;
    p.comparisons++;
    if (winner === lo) p.entity1_wins++;
    else p.entity2_wins++;
    pairs.set(key, p);
  }
  await batch([...pairs], 5000, (tx, [key, data]) => tx.create('pair_state', data, { key }));
  return (performance.now() - started) / 1000;
}

/** p50 and p99 (ms) of `n` sequential runs of `fn` (after 2 warm-up runs). */
async function latency(n: number, fn: () => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < 2; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!;
  return { p50: q(0.5), p99: q(0.99) };
}

async function scale(driver: Driver) {
  const t = newTarget(driver);
  const db = await openDb(t);
  const store = await openEntityStore(db, { indexes, tablePrefix: t.prefix, ownsDatabase: false });
  console.log(`seeding ${driver}: ${settings.scaleEntities} entities, ${settings.scaleComparisons} comparisons…`);
  const seedSeconds = await seed(store, settings.scaleEntities, settings.scaleComparisons);
  console.log(`seeded in ${fmt(seedSeconds, 0)} s`);
  const svc = await startRanking(t);
  const n = settings.samples;
  const rows: Array<{ what: string; http: { p50: number; p99: number }; direct?: { p50: number; p99: number } }> = [];
  try {
    const byRating = [
      { field: 'rating', direction: 'desc' as const },
      { field: 'id', direction: 'asc' as const },
    ];
    rows.push({
      what: 'leaderboard top 100',
      http: await latency(n, () => call(svc.pool, 'GET', '/leaderboard/?limit=100')),
      direct: await latency(n, () => store.query('entity', { order: byRating, limit: 100 })),
    });
    rows.push({
      what: `leaderboard all (${settings.scaleEntities})`,
      http: await latency(Math.max(3, Math.floor(n / 10)), () => call(svc.pool, 'GET', '/leaderboard/')),
    });
    const pool = () =>
      store.query('entity', {
        order: [
          { field: 'comparisons', direction: 'asc' },
          { field: 'id', direction: 'asc' },
        ],
        limit: 200,
      });
    const direct = await latency(n, async () => {
      const { items } = await pool();
      const ids = items.map((e) => e.id);
      await store.query('pair_state', {
        filter: {
          all: [
            { field: 'entity1_id', op: 'in', value: ids },
            { field: 'entity2_id', op: 'in', value: ids },
          ],
        },
        order: [{ field: 'entity1_id', direction: 'asc' }],
        limit: 10000,
      });
    });
    rows.push({
      what: 'UCB next pair',
      http: await latency(n, () => call(svc.pool, 'GET', '/mab/next-comparison/')),
      direct,
    });
    rows.push({
      what: 'similarity next pair',
      http: await latency(n, () => call(svc.pool, 'GET', '/next-comparison/')),
      direct,
    });
  } finally {
    await svc.pool.close();
    await stop(svc.s.child);
    await store.close();
    if (driver === 'postgres') await dropEntitySchema(db, t.prefix);
    await db.close();
  }
  return {
    driver,
    entities: settings.scaleEntities,
    comparisons: settings.scaleComparisons,
    seed_seconds: seedSeconds,
    rows,
  };
}

runBench(
  async () => {
    const pg = await pgReachable();
    const usable = (d: string): d is Driver => d === 'sqlite' || (d === 'postgres' && pg);
    if (!pg) console.log(`PostgreSQL not reachable at ${settings.pgUrl}: skipped`);

    const writes = [];
    for (const d of settings.backends.filter(usable)) writes.push(await throughput(d));
    console.log(
      `\nComparisons through HTTP vs bare inserts (${settings.comparisons} each, ${settings.concurrency} concurrent)\n`,
    );
    printTable(
      ['backend', 'HTTP comparisons/s', 'bare inserts/s', 'ratio'],
      writes.map((w) => [w.driver, fmt(w.http_per_s, 0), fmt(w.bare_per_s, 0), `${fmt(w.ratio, 3)}×`]),
    );

    const reads = [];
    for (const d of settings.latencyBackends.filter(usable)) reads.push(await scale(d));
    for (const r of reads) {
      console.log(
        `\nRead latency, ${r.driver}, ${r.entities} entities, ${r.comparisons} comparisons (ms; ratio = HTTP ÷ direct store call)\n`,
      );
      printTable(
        ['endpoint', 'p50', 'p99', 'direct p50', 'ratio p50'],
        r.rows.map((x) => [
          x.what,
          fmt(x.http.p50, 2),
          fmt(x.http.p99, 2),
          fmt(x.direct?.p50, 2),
          x.direct ? `${fmt(x.http.p50 / x.direct.p50, 2)}×` : '-',
        ]),
      );
    }
    writeResults(join(root, 'bench', 'results', `ranking-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), {
      settings,
      machine: machine(false),
      writes,
      reads,
    });
    return 0;
  },
  { logDir, keepLogs: settings.keepLogs },
);
