/**
 * The entity-store resource on its own (a real SQLite file, a real PluginEnv): the read cache and
 * its honesty across processes, the hour of query statistics, the slow-query report, the gauges
 * across a rebuilt resource (a reload), and a PostgreSQL server that is not there.
 */
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EntityStoreResource } from '../../plugins/entity-store/api.ts';
import entityStore, { type EntityStoreOptions } from '../../plugins/entity-store/index.ts';
import { QueryWindow } from '../../plugins/entity-store/query-stats.ts';
import type { PluginEnv, ResourceInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

const opened: ResourceInstance<EntityStoreResource>[] = [];
afterEach(async () => {
  for (const r of opened.splice(0)) await r.close?.();
});

function options(path: string, extra: Partial<EntityStoreOptions> = {}): EntityStoreOptions {
  return {
    driver: 'sqlite',
    path,
    pool_size: 10,
    sync_mode: 'normal',
    cache_size_mb: 1,
    cache_max_staleness_ms: 0,
    max_entities: 100,
    max_depth: 3,
    table_prefix: 'entity_',
    indexes: {},
    slow_query: { enabled: true, threshold_ms: 100 },
    ...extra,
  };
}

async function open(opts: EntityStoreOptions, env: PluginEnv = createTestEnv()) {
  const r = (await entityStore.create(opts, env)) as ResourceInstance<EntityStoreResource>;
  opened.push(r);
  return r;
}

const dbFile = () => join(mkdtempSync(join(tmpdir(), 'entity-store-')), 'nested', 'store.db');

describe('read cache', () => {
  it('answers repeated reads by id from the cache and counts hits and misses', async () => {
    const { value } = await open(options(dbFile()));
    const e = await value.store.create('item', { name: 'a' });
    expect((await value.store.get('item', e.id))?.data).toEqual({ name: 'a' });
    expect((await value.store.get('item', e.id))?.data).toEqual({ name: 'a' });
    expect(await value.store.get('other', e.id)).toBeUndefined(); // another type: a miss, nothing cached
    const stats = await value.storageStats();
    expect(stats).toMatchObject({ cache_hits: 1, cache_misses: 2, cache_hit_ratio: 0.3333 });
    expect(stats.data_bytes).toBeGreaterThan(0);
    expect(stats.free_bytes).toBeGreaterThan(0);
  });

  it('never serves an entity after a write through this process', async () => {
    const { value } = await open(options(dbFile(), { cache_max_staleness_ms: 60_000 }));
    const e = await value.store.create('item', { n: 1 });
    await value.store.get('item', e.id);
    await value.store.update('item', e.id, { n: 2 });
    expect((await value.store.get('item', e.id))?.data).toEqual({ n: 2 });
    await value.store.transaction(async (tx) => {
      await tx.update('item', e.id, { n: 3 });
    });
    expect((await value.store.get('item', e.id))?.version).toBe(3);
    await value.store.delete('item', e.id);
    expect(await value.store.get('item', e.id)).toBeUndefined();
  });

  it('returns copies: a caller changing an entity does not change the cache', async () => {
    const { value } = await open(options(dbFile()));
    const e = await value.store.create('item', { tags: ['a'] });
    const first = await value.store.get<{ tags: string[] }>('item', e.id);
    first!.data.tags.push('mutated');
    expect((await value.store.get('item', e.id))?.data).toEqual({ tags: ['a'] });
  });

  it("notices another process's write through the change log", async () => {
    const path = dbFile();
    const a = await open(options(path));
    const b = await open(options(path)); // another process on the same file, as a cluster worker is
    const e = await a.value.store.create('item', { n: 1 });
    await a.value.store.get('item', e.id);
    await a.value.store.get('item', e.id); // cached now
    await b.value.store.update('item', e.id, { n: 2 });
    expect((await a.value.store.get('item', e.id))?.data).toEqual({ n: 2 });
  });

  it('can be turned off (cache_size_mb 0): no cache figures', async () => {
    const { value } = await open(options(dbFile(), { cache_size_mb: 0 }));
    const e = await value.store.create('item', {});
    await value.store.get('item', e.id);
    expect(await value.storageStats()).toMatchObject({ cache_hits: null, cache_misses: null, cache_hit_ratio: null });
  });
});

describe('query statistics', () => {
  it('reports the last hour: totals, percentiles within 5 %, top entities; older minutes drop out', () => {
    let now = Date.UTC(2026, 0, 1, 12, 0, 0);
    const w = new QueryWindow(() => now);
    expect(w.stats()).toEqual({
      window_seconds: 3600,
      total: 0,
      errors: 0,
      avg_ms: null,
      p50_ms: null,
      p95_ms: null,
      p99_ms: null,
      top_entities: [],
    });
    for (let i = 1; i <= 100; i++) w.record(i <= 70 ? 'item' : 'user', i, i % 50 === 0);
    const s = w.stats();
    expect(s).toMatchObject({ total: 100, errors: 2, avg_ms: 50.5 });
    expect(s.p50_ms! / 50).toBeGreaterThanOrEqual(1);
    expect(s.p50_ms! / 50).toBeLessThan(1.05);
    expect(s.p99_ms! / 99).toBeLessThan(1.05);
    expect(s.top_entities).toEqual([
      { entity: 'item', queries: 70 },
      { entity: 'user', queries: 30 },
    ]);
    now += 30 * 60_000;
    w.record('item', 1, false);
    expect(w.stats().total).toBe(101);
    now += 31 * 60_000; // the first minute is now more than an hour old
    expect(w.stats().total).toBe(1);
  });

  it('counts the queries the store runs, by entity type', async () => {
    const { value } = await open(options(dbFile()));
    const e = await value.store.create('item', { n: 1 });
    await value.store.query('item', { limit: 5 });
    await value.store.get('item', e.id, { expand: [] });
    await value.store.count('user');
    await expect(value.store.query('item', { limit: 1000 })).rejects.toMatchObject({ code: 'query_budget_exceeded' });
    const s = value.queryStats();
    expect(s.total).toBeGreaterThanOrEqual(3);
    expect(s.top_entities[0]).toEqual({ entity: 'item', queries: expect.any(Number) });
  });
});

describe('slow queries', () => {
  it('groups queries over the threshold by shape, worst first, and limits the list', async () => {
    const { value } = await open(options(dbFile(), { slow_query: { enabled: true, threshold_ms: 0 } }));
    await value.store.create('item', { name: 'x', rating: 1 });
    for (let i = 0; i < 3; i++) await value.store.query('item', { filter: { field: 'name', op: 'eq', value: 'x' } });
    await value.store.query('item', { order: [{ field: 'rating', direction: 'desc' }] });
    const all = value.slowQueries(10);
    expect(all.threshold_ms).toBe(0);
    const byName = all.queries.find((q) => q.shape.includes('filter'));
    expect(byName).toMatchObject({ entity: 'item', count: 3 });
    expect(byName!.max_ms).toBeGreaterThanOrEqual(byName!.avg_ms);
    for (let i = 1; i < all.queries.length; i++) {
      expect(all.queries[i - 1]!.max_ms).toBeGreaterThanOrEqual(all.queries[i]!.max_ms);
    }
    expect(value.slowQueries(1).queries).toHaveLength(1);
  });

  it('records nothing when disabled', async () => {
    const { value } = await open(options(dbFile(), { slow_query: { enabled: false, threshold_ms: 0 } }));
    await value.store.query('item', {});
    expect(value.slowQueries(10)).toEqual({ threshold_ms: 0, queries: [] });
  });
});

describe('gauges across a reload', () => {
  it('report the store now open, not a closed one', async () => {
    const env = createTestEnv();
    const path = dbFile();
    const first = await open(options(path), env);
    await first.value.store.create('item', {});
    await first.close?.();
    opened.splice(opened.indexOf(first), 1);
    const second = await open(options(path), env); // the rebuilt graph's resource, same registry
    await second.value.store.create('item', {});
    const text = await env.metrics.registry.metrics();
    expect(text).toMatch(/^db_entity_count\{entity_type="item"\} 2$/m);
    expect(text).toMatch(/^db_storage_size_bytes \d+$/m);
  });
});

describe('PostgreSQL that is not there', () => {
  it('opens anyway: health says error, calls answer 503, and it keeps trying', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
    const r = await open(
      options('unused.db', { driver: 'postgres', url: `postgres://postgres@127.0.0.1:${port}/test`, pool_size: 1 }),
    );
    expect(await r.health?.()).toMatchObject({ ok: false, status: 'error' });
    await expect(r.value.store.query('item')).rejects.toMatchObject({
      kind: 'unavailable',
      code: 'storage_unavailable',
    });
    expect(await r.value.storageStats()).toMatchObject({ data_bytes: null, free_bytes: null });
    expect(r.describe?.()).toMatchObject({ driver: 'postgres', open: false, database: `127.0.0.1:${port}/test` });
  });

  it('refuses a postgres store without a url', async () => {
    await expect(entityStore.create(options('unused.db', { driver: 'postgres' }), createTestEnv())).rejects.toThrow(
      /url/,
    );
  });
});
