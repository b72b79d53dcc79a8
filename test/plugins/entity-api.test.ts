/**
 * The entity API as a client sees it: the datastore service started from configs/datastore.toml
 * (its settings file; every setting given here through the environment, as an operator would) on
 * ephemeral ports, on SQLite and on PostgreSQL. PostgreSQL at 127.0.0.1:5432 (database `test`):
 * required when CI=true, else skipped with the reason shown; each run uses its own table prefix
 * and drops its tables.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EntityStoreResource } from '../../plugins/entity-store/api.ts';
import { type EntityStore, openSqlDatabase } from '../../runtime/index.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { PG_URL, tcpReachable } from '../helpers/reachable.ts';
import { writeServiceFile } from '../helpers/services.ts';

const pgUp = await tcpReachable(5432);
const skipPg = !pgUp && process.env.CI !== 'true';
if (skipPg) console.warn('entity API on PostgreSQL skipped: nothing at 127.0.0.1:5432');

const CONFIG = 'configs/datastore.toml';
const TOKEN = 'test-admin-token';
const MAX_ENTITIES = 50;
const MAX_DEPTH = 2;

/** Settings every test service gets: ephemeral ports, a temporary data directory, small budgets. */
function baseEnv(dir: string): Record<string, string> {
  return {
    DB_SERVER_PORT: '0',
    DB_METRICS_PORT: '0',
    DB_STORAGE_PATH: join(dir, 'data', 'datastore.db'),
    DB_QUERY_MAX_ENTITIES: String(MAX_ENTITIES),
    DB_QUERY_MAX_DEPTH: String(MAX_DEPTH),
    DB_LOGGING_LEVEL: 'error',
    DB_LOGGING_SLOW_QUERY_THRESHOLD_MS: '0',
    DB_LOGGING_SLOW_QUERY_LOG_FILE: join(dir, 'logs', 'slow.log'),
    DB_ADMIN_TOKEN: TOKEN,
  };
}

const prefix = `t${randomUUID().replace(/-/g, '').slice(0, 10)}_`;
afterAll(async () => {
  if (!pgUp) return;
  const db = await openSqlDatabase({ driver: 'postgres', url: PG_URL });
  for (const t of ['entities', 'changes', 'meta']) await db.exec(`DROP TABLE IF EXISTS ${prefix}${t}`);
  await db.close();
});

const drivers = [
  { name: 'sqlite', skip: false, env: {} as Record<string, string> },
  {
    name: 'postgres',
    skip: skipPg,
    env: { DB_STORAGE_DRIVER: 'postgres', DB_STORAGE_URL: PG_URL, DB_STORAGE_TABLE_PREFIX: prefix },
  },
];

/** `# TYPE` lines of a Prometheus text page, and the value of one sample. */
function parseMetrics(text: string) {
  const types = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1]!, m[2]!);
  const value = (name: string, labels: Record<string, string> = {}): number | undefined => {
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').at(-1));
    }
    return undefined;
  };
  return { types, value };
}

describe.each(drivers)('entity API on $name', ({ name, skip, env }) => {
  let svc: StartedService;
  let dir: string;
  let resource: EntityStoreResource;
  let store: EntityStore;

  const api = (path: string, init: RequestInit = {}) => fetch(`${svc.url}${path}`, init);
  const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    api(path, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  const create = async (type: string, data: Record<string, unknown>) => {
    const res = await send('POST', `/v1/entities/${type}`, data);
    expect(res.status).toBe(201);
    return (await res.json()) as { id: number; version: number; data: Record<string, unknown> };
  };
  const metrics = async () => parseMetrics(await (await fetch(`${svc.metricsUrl}/metrics`)).text());

  beforeAll(async () => {
    if (skip) return;
    dir = mkdtempSync(join(tmpdir(), `datastore-${name}-`));
    svc = await startService(CONFIG, { env: { ...baseEnv(dir), ...env } });
    resource = svc.runtime.graph.resources.get('store')!.value as EntityStoreResource;
    store = resource.store;
  });
  afterAll(() => svc?.close());

  it.skipIf(skip)('creates, reads, replaces, merges and deletes an entity', async () => {
    const res = await send('POST', '/v1/entities/item', { name: 'lamp', rating: 4, tags: { colour: 'red' } });
    expect(res.status).toBe(201);
    const created = await res.json();
    expect(created).toMatchObject({ type: 'item', key: null, version: 1, data: { name: 'lamp', rating: 4 } });
    expect(res.headers.get('location')).toBe(`/v1/entities/item/${created.id}`);
    expect(res.headers.get('etag')).toBe('"1"');

    const read = await api(res.headers.get('location')!);
    expect(read.status).toBe(200);
    expect(read.headers.get('etag')).toBe('"1"');
    expect(await read.json()).toEqual(created);
    const notModified = await api(`/v1/entities/item/${created.id}`, { headers: { 'If-None-Match': '"1"' } });
    expect(notModified.status).toBe(304);

    const put = await send('PUT', `/v1/entities/item/${created.id}`, { name: 'lamp', rating: 5 });
    expect(put.status).toBe(200);
    expect(put.headers.get('etag')).toBe('"2"');
    expect((await put.json()).data).toEqual({ name: 'lamp', rating: 5 });

    const patch = await send(
      'PATCH',
      `/v1/entities/item/${created.id}`,
      { rating: null, price: 12.5, tags: { size: 'L' } },
      { 'content-type': 'application/merge-patch+json' },
    );
    expect(patch.status).toBe(200);
    const patched = await patch.json();
    expect(patched.version).toBe(3);
    expect(patched.data).toEqual({ name: 'lamp', price: 12.5, tags: { size: 'L' } });
    expect((await (await api(`/v1/entities/item/${created.id}`)).json()).data).toEqual(patched.data);

    const del = await send('DELETE', `/v1/entities/item/${created.id}`);
    expect(del.status).toBe(204);
    const gone = await api(`/v1/entities/item/${created.id}`);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ error: 'entity_not_found', details: { type: 'item', id: created.id } });
    expect((await send('DELETE', `/v1/entities/item/${created.id}`)).status).toBe(404);
  });

  it.skipIf(skip)('creates with a key and refuses a duplicate key with 409', async () => {
    const key = `k-${randomUUID()}`;
    const first = await send('POST', `/v1/entities/item?key=${key}`, { name: 'keyed' });
    expect(first.status).toBe(201);
    expect((await first.json()).key).toBe(key);
    const again = await send('POST', `/v1/entities/item?key=${key}`, { name: 'other' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ error: 'duplicate_key' });
  });

  it.skipIf(skip)('honours If-Match: 412 with the current version on a stale write, data unchanged', async () => {
    const e = await create('doc', { title: 'v1' });
    const path = `/v1/entities/doc/${e.id}`;
    expect((await send('PUT', path, { title: 'v2' }, { 'If-Match': '"1"' })).status).toBe(200);

    for (const method of ['PUT', 'PATCH']) {
      const stale = await send(method, path, { title: 'lost update' }, { 'If-Match': '"1"' });
      expect(stale.status).toBe(412);
      expect(stale.headers.get('etag')).toBe('"2"');
      expect(await stale.json()).toMatchObject({
        error: 'precondition_failed',
        details: { type: 'doc', id: e.id, current_version: 2 },
      });
    }
    const staleDelete = await send('DELETE', path, undefined, { 'If-Match': '"1"' });
    expect(staleDelete.status).toBe(412);
    const now = await (await api(path)).json();
    expect(now).toMatchObject({ version: 2, data: { title: 'v2' } });

    // A list of tags matches any of them; * matches whatever exists.
    expect((await send('PATCH', path, { n: 1 }, { 'If-Match': '"7", "2"' })).status).toBe(200);
    expect((await send('PUT', path, { title: 'v4' }, { 'If-Match': '*' })).status).toBe(200);
    // If-Match compares strongly: a weak tag never matches.
    expect((await send('PUT', path, { title: 'weak' }, { 'If-Match': 'W/"4"' })).status).toBe(412);
    expect((await send('DELETE', path, undefined, { 'If-Match': '"4"' })).status).toBe(204);
    // Preconditions on something missing: 404, as without them.
    expect((await send('PUT', path, { title: 'x' }, { 'If-Match': '"4"' })).status).toBe(404);
  });

  it.skipIf(skip)('without If-Match the last write wins', async () => {
    const e = await create('doc', { title: 'a' });
    const path = `/v1/entities/doc/${e.id}`;
    await Promise.all([send('PUT', path, { title: 'b' }), send('PUT', path, { title: 'c' })]);
    const after = await (await api(path)).json();
    expect(after.version).toBe(3);
    expect(['b', 'c']).toContain(after.data.title);
  });

  it.skipIf(skip)('lists with where filters, a JSON filter, order, paging and a count', async () => {
    const type = `shelf_${name}`;
    const rows = [
      { name: 'alpha', rating: 3, colour: 'red', stats: { wins: 1 } },
      { name: 'bravo', rating: 5, colour: 'blue', stats: { wins: 7 } },
      { name: 'charlie', rating: 4, colour: 'red', stats: { wins: 3 } },
      { name: 'delta', rating: 5, colour: 'green', stats: { wins: 2 } },
      { name: '42', rating: 1, colour: 'red', stats: { wins: 0 } },
    ];
    for (const r of rows) await create(type, r);
    const list = async (query: string) => {
      const res = await api(`/v1/entities/${type}?${query}`);
      expect(res.status, query).toBe(200);
      return (await res.json()) as { items: Array<{ data: { name: string } }>; total?: number; limit: number };
    };
    const names = (body: { items: Array<{ data: { name: string } }> }) => body.items.map((i) => i.data.name);

    expect(names(await list(''))).toEqual(['alpha', 'bravo', 'charlie', 'delta', '42']);
    expect(names(await list('order=-rating,name'))).toEqual(['bravo', 'delta', 'charlie', 'alpha', '42']);
    expect(names(await list('where[colour]=red&order=name'))).toEqual(['42', 'alpha', 'charlie']);
    expect(names(await list('where[rating][gte]=4&where[colour][ne]=green'))).toEqual(['bravo', 'charlie']);
    expect(names(await list('where[stats.wins][gt]=2'))).toEqual(['bravo', 'charlie']);
    expect(names(await list('where[colour][in]=blue,green'))).toEqual(['bravo', 'delta']);
    expect(names(await list('where[name][contains]=RAV'))).toEqual(['bravo']);
    // A number-looking value compares as a number; quoted, as a string.
    expect(names(await list('where[name]=%2242%22'))).toEqual(['42']);
    const filter = encodeURIComponent(
      JSON.stringify({
        any: [
          { field: 'rating', op: 'lt', value: 2 },
          { field: 'name', value: 'delta' },
        ],
      }),
    );
    expect(names(await list(`filter=${filter}`))).toEqual(['delta', '42']);

    const page = await list('order=name&limit=2&offset=1&count=true');
    expect(names(page)).toEqual(['alpha', 'bravo']);
    expect(page).toMatchObject({ limit: 2, offset: 1, total: 5 });
    expect((await list('offset=10')).items).toEqual([]);
    expect((await list('count=false')).total).toBeUndefined();
  });

  it.skipIf(skip)('expands references on read and list', async () => {
    const org = await create('org', { name: 'Acme' });
    const author = await create('author', { name: 'Ada', org: org.id });
    const book = await create('book', { title: 'Notes', author: author.id });

    const one = await (await api(`/v1/entities/book/${book.id}?expand=author,author.org`)).json();
    expect(one.data.author).toMatchObject({ id: author.id, type: 'author', data: { name: 'Ada' } });
    expect(one.data.author.data.org).toMatchObject({ id: org.id, data: { name: 'Acme' } });

    const listed = await (await api(`/v1/entities/book?where[title]=Notes&expand=author`)).json();
    expect(listed.items[0].data.author).toMatchObject({ id: author.id, data: { name: 'Ada', org: org.id } });
  });

  it.skipIf(skip)('refuses queries over a budget with 400 naming it, and counts them', async () => {
    const before = (await metrics()).value('db_query_budget_exceeded_total', { budget: 'max_entities' }) ?? 0;
    const tooMany = await api(`/v1/entities/item?limit=${MAX_ENTITIES + 1}`);
    expect(tooMany.status).toBe(400);
    expect(await tooMany.json()).toMatchObject({
      error: 'query_budget_exceeded',
      details: { budget: 'max_entities', limit: MAX_ENTITIES },
    });
    expect((await metrics()).value('db_query_budget_exceeded_total', { budget: 'max_entities' })).toBe(before + 1);

    const depthBefore = (await metrics()).value('db_query_budget_exceeded_total', { budget: 'max_depth' }) ?? 0;
    const tooDeep = await api('/v1/entities/book?expand=author.org.parent');
    expect(tooDeep.status).toBe(400);
    expect(await tooDeep.json()).toMatchObject({ error: 'query_budget_exceeded', details: { budget: 'max_depth' } });
    expect((await metrics()).value('db_query_budget_exceeded_total', { budget: 'max_depth' })).toBe(depthBefore + 1);
  });

  it.skipIf(skip)('answers bad input of every kind with a 4xx naming what is wrong, and changes nothing', async () => {
    const victim = await create('item', { name: 'victim', rating: 2 });
    const at = `/v1/entities/item/${victim.id}`;
    const seqBefore = await store.lastSeq();
    const countBefore = await store.count('item');
    const huge = JSON.stringify({ blob: 'x'.repeat(1024 * 1024 + 10) });

    type Case = [string, string, string, unknown?, Record<string, string>?];
    const cases: Array<{ c: Case; status: number; names?: Record<string, unknown>; error?: string }> = [
      // bodies
      { c: ['wrong type: array body', 'POST', '/v1/entities/item', '[1,2]'], status: 400 },
      { c: ['wrong type: string body', 'POST', '/v1/entities/item', '"lamp"'], status: 400 },
      { c: ['invalid JSON', 'POST', '/v1/entities/item', '{"name": '], status: 400 },
      { c: ['empty body', 'POST', '/v1/entities/item', ''], status: 400 },
      {
        c: ['bad field name', 'POST', '/v1/entities/item', { 'Name; DROP': 1 }],
        status: 400,
        names: { field: 'Name; DROP' },
      },
      { c: ['reserved field', 'POST', '/v1/entities/item', { version: 9 }], status: 400, names: { field: 'version' } },
      { c: ['not JSON', 'POST', '/v1/entities/item', '<a/>', { 'content-type': 'application/xml' }], status: 415 },
      // What a cross-site page can post without a preflight is refused, JSON or not.
      {
        c: ['a form', 'POST', '/v1/entities/item', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }],
        status: 415,
      },
      {
        c: ['JSON as text/plain', 'POST', '/v1/entities/item', '{"name":"x"}', { 'content-type': 'text/plain' }],
        status: 415,
      },
      { c: ['too large', 'POST', '/v1/entities/item', huge], status: 413 },
      { c: ['array replace', 'PUT', at, '[]'], status: 400 },
      { c: ['bad field in patch', 'PATCH', at, { 'a-b': 1 }], status: 400, names: { field: 'a-b' } },
      // path parameters
      { c: ['bad type', 'POST', '/v1/entities/Item', { a: 1 }], status: 400, names: { param: 'type' } },
      {
        c: ['SQL in type', 'POST', `/v1/entities/${encodeURIComponent("item'; DROP TABLE x;--")}`, { a: 1 }],
        status: 400,
        names: { param: 'type' },
      },
      { c: ['id not a number', 'GET', '/v1/entities/item/abc'], status: 400, names: { param: 'id' } },
      { c: ['id zero', 'PUT', '/v1/entities/item/0', { a: 1 }], status: 400, names: { param: 'id' } },
      { c: ['id negative', 'DELETE', '/v1/entities/item/-1'], status: 400, names: { param: 'id' } },
      { c: ['id too big', 'GET', '/v1/entities/item/99999999999999999999'], status: 400, names: { param: 'id' } },
      // query parameters
      { c: ['limit not a number', 'GET', '/v1/entities/item?limit=ten'], status: 400, names: { param: 'limit' } },
      { c: ['limit zero', 'GET', '/v1/entities/item?limit=0'], status: 400, names: { param: 'limit' } },
      { c: ['huge page', 'GET', '/v1/entities/item?limit=1000000'], status: 400, names: { param: 'limit' } },
      { c: ['negative offset', 'GET', '/v1/entities/item?offset=-1'], status: 400, names: { param: 'offset' } },
      { c: ['offset overflow', 'GET', '/v1/entities/item?offset=1e99'], status: 400, names: { param: 'offset' } },
      { c: ['unknown param', 'GET', '/v1/entities/item?sort=name'], status: 400, names: { param: 'sort' } },
      { c: ['param on read', 'GET', `${at}?limit=1`], status: 400, names: { param: 'limit' } },
      { c: ['param on delete', 'DELETE', `${at}?force=true`], status: 400, names: { param: 'force' } },
      { c: ['repeated param', 'GET', '/v1/entities/item?limit=1&limit=2'], status: 400, names: { param: 'limit' } },
      { c: ['bad where field', 'GET', '/v1/entities/item?where[na me]=x'], status: 400 },
      { c: ['bad operator', 'GET', '/v1/entities/item?where[name][regex]=x'], status: 400 },
      { c: ['malformed where', 'GET', '/v1/entities/item?where[name]x=1'], status: 400 },
      {
        c: ['SQL in order', 'GET', `/v1/entities/item?order=${encodeURIComponent('name; DROP TABLE x')}`],
        status: 400,
        names: { param: 'order' },
      },
      {
        c: ['SQL in where field', 'GET', `/v1/entities/item?where[${encodeURIComponent('1=1) OR (1')}]=1`],
        status: 400,
      },
      { c: ['filter not JSON', 'GET', '/v1/entities/item?filter=rating>3'], status: 400, names: { param: 'filter' } },
      {
        c: ['filter bad shape', 'GET', `/v1/entities/item?filter=${encodeURIComponent('{"all":"x"}')}`],
        status: 400,
        names: { param: 'filter' },
      },
      {
        c: [
          'filter SQL field',
          'GET',
          `/v1/entities/item?filter=${encodeURIComponent('{"field":"x\') OR 1=1 --","value":1}')}`,
        ],
        status: 400,
        names: { param: 'filter' },
      },
      {
        c: [
          'filter wrong value type',
          'GET',
          `/v1/entities/item?filter=${encodeURIComponent('{"field":"a","op":"in","value":{"x":1}}')}`,
        ],
        status: 400,
        names: { param: 'filter' },
      },
      { c: ['bad expand', 'GET', '/v1/entities/item?expand=a..b'], status: 400, names: { param: 'expand' } },
      { c: ['bad count', 'GET', '/v1/entities/item?count=maybe'], status: 400, names: { param: 'count' } },
      {
        c: ['bad key', 'POST', `/v1/entities/item?key=${'k'.repeat(300)}`, { a: 1 }],
        status: 400,
        names: { param: 'key' },
      },
      // headers
      {
        c: ['malformed If-Match', 'PUT', at, { a: 1 }, { 'If-Match': 'version 1' }],
        status: 400,
        names: { header: 'If-Match' },
      },
      { c: ['stale If-Match', 'DELETE', at, undefined, { 'If-Match': '"99"' }], status: 412 },
      // methods
      { c: ['POST on an item', 'POST', at, { a: 1 }], status: 405 },
      { c: ['DELETE on a collection', 'DELETE', '/v1/entities/item'], status: 405 },
    ];
    for (const { c, status, names } of cases) {
      const [label, method, path, body, headers] = c;
      const res = await send(method, path, body, headers);
      expect(res.status, label).toBe(status);
      const json = await res.json();
      expect(typeof json.error, label).toBe('string');
      expect(typeof json.message, label).toBe('string');
      if (names) expect(json.details, label).toMatchObject(names);
    }

    // SQL-looking values are plain values: no match, no harm.
    const injection = await api(`/v1/entities/item?where[name]=${encodeURIComponent("' OR '1'='1")}`);
    expect(injection.status).toBe(200);
    expect((await injection.json()).items).toEqual([]);

    expect(await store.lastSeq()).toBe(seqBefore);
    expect(await store.count('item')).toBe(countBefore);
    expect(await (await api(at)).json()).toMatchObject({ version: 1, data: { name: 'victim', rating: 2 } });
  });

  it.skipIf(skip)('stores SQL-looking strings verbatim', async () => {
    const text = "Robert'); DROP TABLE entity_entities;--";
    const e = await create('student', { name: text });
    expect((await (await api(`/v1/entities/student/${e.id}`)).json()).data.name).toBe(text);
  });

  it.skipIf(skip)('refuses writes on a read-only store with 403 read_only, reads still work', async () => {
    const e = await create('item', { name: 'ro' });
    store.setReadOnly('replica of primary');
    try {
      const seq = await store.lastSeq();
      for (const [method, path, body] of [
        ['POST', '/v1/entities/item', { a: 1 }],
        ['PUT', `/v1/entities/item/${e.id}`, { a: 1 }],
        ['PATCH', `/v1/entities/item/${e.id}`, { a: 1 }],
        ['DELETE', `/v1/entities/item/${e.id}`, undefined],
      ] as const) {
        const res = await send(method, path, body);
        expect(res.status, method).toBe(403);
        expect(await res.json(), method).toMatchObject({ error: 'read_only' });
      }
      expect(await store.lastSeq()).toBe(seq);
      expect((await api(`/v1/entities/item/${e.id}`)).status).toBe(200);
    } finally {
      store.setReadOnly(undefined);
    }
  });

  it.skipIf(skip)('exports the db_* metrics with the seed types', async () => {
    const { types, value } = await metrics();
    const expected: Record<string, string> = {
      db_server_uptime_seconds: 'gauge',
      db_server_connections_active: 'gauge',
      db_server_connections_total: 'counter',
      db_server_requests_total: 'counter',
      db_server_request_duration_seconds: 'histogram',
      db_query_total: 'counter',
      db_query_duration_seconds: 'histogram',
      db_query_rows_returned: 'histogram',
      db_query_entities_scanned: 'histogram',
      db_query_budget_exceeded_total: 'counter',
      db_mutation_total: 'counter',
      db_mutation_duration_seconds: 'histogram',
      db_mutation_rows_affected: 'histogram',
      db_mutation_conflicts_total: 'counter',
      db_storage_size_bytes: 'gauge',
      db_storage_index_size_bytes: 'gauge',
      db_storage_wal_size_bytes: 'gauge',
      db_storage_free_bytes: 'gauge',
      db_storage_cache_hits_total: 'counter',
      db_storage_cache_misses_total: 'counter',
      db_storage_cache_hit_ratio: 'gauge',
      db_entity_count: 'gauge',
      db_entity_size_bytes: 'gauge',
    };
    for (const [metric, type] of Object.entries(expected)) expect(types.get(metric), metric).toBe(type);
    // Storage gauges lag up to 5 s (a cached snapshot): items existed before the first scrape.
    expect(value('db_entity_count', { entity_type: 'item' })).toBeGreaterThanOrEqual(1);
    expect(value('db_entity_size_bytes', { entity_type: 'item' })).toBeGreaterThan(0);
    expect(value('db_storage_size_bytes')).toBeGreaterThan(0);
    expect(value('db_mutation_conflicts_total')).toBeGreaterThanOrEqual(1); // the If-Match test
    expect(value('db_server_requests_total', { status: 'error' })).toBeGreaterThan(0);
    const ratio = value('db_storage_cache_hit_ratio')!;
    expect(ratio).toBeGreaterThanOrEqual(0);
    expect(ratio).toBeLessThanOrEqual(1);
    if (name === 'sqlite') expect(value('db_storage_free_bytes')).toBeGreaterThan(0);
  });

  it.skipIf(skip)('serves the operations reports and writes the slow-query log', async () => {
    const get = async (path: string) => {
      const res = await api(path, { headers: { 'X-Admin-Token': TOKEN } });
      expect(res.status, path).toBe(200);
      return res.json();
    };
    const queries = await get('/admin/stats/queries');
    expect(Object.keys(queries).sort()).toEqual(
      ['avg_ms', 'errors', 'p50_ms', 'p95_ms', 'p99_ms', 'top_entities', 'total', 'window_seconds'].sort(),
    );
    expect(queries.window_seconds).toBe(3600);
    expect(queries.total).toBeGreaterThan(0);
    expect(queries.p50_ms).toBeLessThanOrEqual(queries.p99_ms);
    expect(queries.top_entities[0]).toEqual({ entity: expect.any(String), queries: expect.any(Number) });

    const storage = await get('/admin/stats/storage');
    expect(Object.keys(storage).sort()).toEqual(
      ['cache_hit_ratio', 'cache_hits', 'cache_misses', 'data_bytes', 'free_bytes', 'index_bytes', 'wal_bytes'].sort(),
    );
    expect(storage.data_bytes).toBeGreaterThan(0);
    expect(storage.cache_hits + storage.cache_misses).toBeGreaterThan(0);

    // Threshold 0 in these tests: every query is slow.
    const slow = await get('/admin/slow-queries?limit=3');
    expect(slow.threshold_ms).toBe(0);
    expect(slow.queries.length).toBe(3);
    expect(slow.queries[0]).toEqual({
      shape: expect.any(String),
      entity: expect.any(String),
      count: expect.any(Number),
      avg_ms: expect.any(Number),
      max_ms: expect.any(Number),
      last_at: expect.any(String),
    });
    expect(slow.queries[0].max_ms).toBeGreaterThanOrEqual(slow.queries[1].max_ms);

    const lines = readFileSync(join(dir, 'logs', 'slow.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.at(-1)).toEqual({
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      level: 'warn',
      target: 'slow_query',
      message: expect.any(String),
      entity: expect.any(String),
      shape: expect.any(String),
      duration_ms: expect.any(Number),
      rows_returned: expect.any(Number),
      request_id: expect.any(String),
    });
    expect((await api('/admin/stats/queries')).status).toBe(401);
  });

  it.skipIf(skip)('answers /health, /ready and /openapi.json', async () => {
    const health = await api('/health');
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'healthy', version: '0.1.0' });

    const ready = await api('/ready');
    expect(ready.status).toBe(200);
    const body = await ready.json();
    expect(body).toEqual({ status: 'ready', storage: 'ok', connections: expect.any(Number) });
    expect(body.connections).toBeGreaterThanOrEqual(1);

    const doc = await (await api('/openapi.json')).json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(['/v1/entities/{type}', '/v1/entities/{type}/{id}']);
    expect(Object.keys(doc.paths['/v1/entities/{type}/{id}'])).toEqual(
      expect.arrayContaining(['get', 'put', 'patch', 'delete']),
    );
    expect(doc.components.parameters.limit.schema.maximum).toBe(100);
    expect((await api('/openapi.json?x=1')).status).toBe(400);
  });
});

describe('readiness when the storage is unusable', () => {
  let svc: StartedService;

  beforeAll(async () => {
    // A port nobody listens on: take one, then free it.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
    const dir = mkdtempSync(join(tmpdir(), 'datastore-dead-'));
    svc = await startService(CONFIG, {
      env: {
        ...baseEnv(dir),
        DB_STORAGE_DRIVER: 'postgres',
        DB_STORAGE_URL: `postgres://postgres@127.0.0.1:${port}/test`,
      },
    });
  });
  afterAll(() => svc?.close());

  it('starts, stays alive, reports not ready and answers 503 to entity calls', async () => {
    const ready = await fetch(`${svc.url}/ready`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({
      status: 'not_ready',
      storage: 'error',
      connections: expect.any(Number),
    });

    const health = await fetch(`${svc.url}/health`);
    expect(health.status).toBe(200);

    const list = await fetch(`${svc.url}/v1/entities/item`);
    expect(list.status).toBe(503);
    expect(list.headers.get('retry-after')).toBe('5');
    expect(await list.json()).toMatchObject({ error: 'storage_unavailable', details: { storage: 'error' } });

    // Metrics still scrape (the store's gauges are left out while it cannot answer).
    const metrics = await fetch(`${svc.metricsUrl}/metrics`);
    expect(metrics.status).toBe(200);
  });
});

describe('require_if_match', () => {
  let svc: StartedService;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'datastore-ifmatch-'));
    const file = writeServiceFile(
      `
service: strict-entities
listen: { port: 0 }
resources:
  store: { type: entity-store, path: ./data/store.db }
routes:
  - match: { method: [GET, POST], path: /e/:type }
    pipeline: [{ entity-api: { store: store, require_if_match: true } }]
  - match: { method: [GET, PUT, PATCH, DELETE], path: /e/:type/:id }
    pipeline: [{ entity-api: { store: store, require_if_match: true } }]
  - match: { method: GET, path: /openapi.json }
    pipeline: [{ entity-api: { store: store, op: openapi, base_path: /e, require_if_match: true } }]
`,
      dir,
    );
    svc = await startService(file);
  });
  afterAll(() => svc?.close());

  it('refuses unconditional writes with 428 and accepts conditional ones', async () => {
    const created = await fetch(`${svc.url}/e/note`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'a' }),
    });
    expect(created.status).toBe(201);
    const { id } = await created.json();
    const write = (method: string, headers: Record<string, string> = {}) =>
      fetch(`${svc.url}/e/note/${id}`, {
        method,
        headers: { 'content-type': 'application/json', ...headers },
        body: method === 'DELETE' ? undefined : '{"text":"b"}',
      });
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const res = await write(method);
      expect(res.status, method).toBe(428);
      expect(await res.json(), method).toMatchObject({
        error: 'precondition_required',
        details: { header: 'If-Match' },
      });
    }
    expect((await write('PUT', { 'If-Match': '"1"' })).status).toBe(200);
    expect((await write('DELETE', { 'If-Match': '"2"' })).status).toBe(204);

    const doc = await (await fetch(`${svc.url}/openapi.json`)).json();
    expect(Object.keys(doc.paths)).toEqual(['/e/{type}', '/e/{type}/{id}']);
    expect(doc.paths['/e/{type}/{id}'].put.parameters[0]).toMatchObject({ name: 'If-Match', required: true });
  });
});
