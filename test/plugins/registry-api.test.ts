/**
 * The registry API over HTTP: a real service started from YAML with the registry-api stage on
 * each route (as configs/registry-api.yaml wires it), over the shipped registry.
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { shippedRegistryYaml, writeServiceFile } from '../helpers/services.ts';

const yaml = `
service: registry-api-test
version: 0.0.1
listen: { port: 0 }
dialect: simple
resources:
  registry: ${shippedRegistryYaml}
routes:
  - match: { method: GET, path: /api/stypes }
    pipeline: [{ registry-api: { registry: registry, op: list } }]
  - match: { method: GET, path: /api/stypes/:stype }
    pipeline: [{ registry-api: { registry: registry, op: detail } }]
  - match: { method: GET, path: /api/stypes/:stype/schema }
    pipeline: [{ registry-api: { registry: registry, op: schema } }]
  - match: { method: POST, path: /api/validate }
    pipeline: [{ registry-api: { registry: registry, op: validate } }]
  - match: { method: GET, path: /api/profiles }
    pipeline: [{ registry-api: { registry: registry, op: profiles } }]
  - match: { method: GET, path: /api/search }
    pipeline: [{ registry-api: { registry: registry, op: search } }]
  - match: { method: POST, path: /validate }
    pipeline: [{ registry-api: { registry: registry, op: validate, invalid_status: 422 } }]
`;

// biome-ignore lint/suspicious/noExplicitAny: response bodies are arbitrary JSON, asserted field by field
type Body = Record<string, any>;

let service: StartedService;
let file: string;

beforeAll(async () => {
  file = writeServiceFile(yaml);
  service = await startService(file);
});
afterAll(async () => {
  await service?.close();
  rmSync(dirname(file), { recursive: true, force: true });
});

async function get(path: string) {
  const res = await fetch(service.url + path);
  return {
    status: res.status,
    type: res.headers.get('content-type') ?? '',
    body: (await res.json()) as Body,
  };
}

async function post(path: string, body: unknown) {
  const res = await fetch(service.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Body };
}

const summaryKeys = ['created_at', 'description', 'samples', 'status', 'stype', 'updated_at', 'version'];

describe('GET /api/stypes', () => {
  it('lists every SType with default pagination (page 1, limit 20)', async () => {
    const { status, body } = await get('/api/stypes');
    expect(status).toBe(200);
    const total = body.pagination.total;
    expect(total).toBeGreaterThanOrEqual(16);
    expect(body.pagination).toEqual({ page: 1, limit: 20, total, total_pages: Math.ceil(total / 20) });
    expect(body.data).toHaveLength(Math.min(total, 20));
    for (const s of body.data) {
      expect(Object.keys(s).sort()).toEqual(summaryKeys);
      expect(['approved', 'pending']).toContain(s.status);
      expect(typeof s.samples).toBe('number');
      expect(new Date(s.created_at).toISOString()).toBeTruthy();
    }
  });

  it('pages through the list', async () => {
    const all = (await get('/api/stypes?limit=100')).body.data.map((s: { stype: string }) => s.stype);
    const page2 = await get('/api/stypes?page=2&limit=5');
    expect(page2.body.data.map((s: { stype: string }) => s.stype)).toEqual(all.slice(5, 10));
    expect(page2.body.pagination).toEqual({
      page: 2,
      limit: 5,
      total: all.length,
      total_pages: Math.ceil(all.length / 5),
    });
    const beyond = await get('/api/stypes?page=99&limit=5');
    expect(beyond.status).toBe(200);
    expect(beyond.body.data).toEqual([]);
  });

  it('filters by status', async () => {
    const approved = await get('/api/stypes?status=approved&limit=100');
    const pending = await get('/api/stypes?status=pending&limit=100');
    const all = await get('/api/stypes?status=all&limit=100');
    expect(approved.body.data.every((s: { status: string }) => s.status === 'approved')).toBe(true);
    expect(pending.body.data.every((s: { status: string }) => s.status === 'pending')).toBe(true);
    expect(approved.body.data.length).toBeGreaterThan(0);
    expect(pending.body.data.length).toBeGreaterThan(0);
    expect(approved.body.pagination.total + pending.body.pagination.total).toBe(all.body.pagination.total);
  });

  it('clamps a limit above 100 to 100', async () => {
    const { status, body } = await get('/api/stypes?limit=500');
    expect(status).toBe(200);
    expect(body.pagination.limit).toBe(100);
  });

  it.each([
    ['page=0', 'page'],
    ['page=-1', 'page'],
    ['page=abc', 'page'],
    ['page=1.5', 'page'],
    ['limit=0', 'limit'],
    ['limit=ten', 'limit'],
    ['limit=1e2', 'limit'],
    ['status=archived', 'status'],
    ['page=1&page=2', 'page'],
  ])('answers 400 bad_request naming the parameter for %s', async (query, parameter) => {
    const { status, body } = await get(`/api/stypes?${query}`);
    expect(status).toBe(400);
    expect(body).toMatchObject({ error: 'bad_request', details: { parameter } });
    expect(typeof body.message).toBe('string');
  });
});

describe('GET /api/stypes/:stype', () => {
  it('answers the detail: summary, namespace, hash of the canonical schema, schema_url, profiles, policies', async () => {
    const { status, body } = await get('/api/stypes/everything.echo');
    expect(status).toBe(200);
    expect(body).toMatchObject({
      stype: 'everything.echo',
      status: 'approved',
      namespace: 'everything',
      schema_url: '/api/stypes/everything.echo/schema',
    });
    expect(Object.keys(body).sort()).toEqual(
      [...summaryKeys, 'hash', 'namespace', 'policies', 'qom_profiles', 'schema_url'].sort(),
    );
    expect(body.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    const schema = (await get(body.schema_url)).body;
    expect(body.hash).toBe(`sha256:${sha256Hex(canonicalJson(schema))}`);
    expect(body.qom_profiles).toContain('default');
    expect(body.policies).toContain('default');
  });

  it('answers 404 not_found for an unknown SType', async () => {
    const { status, body } = await get('/api/stypes/everything.nope');
    expect(status).toBe(404);
    expect(body).toMatchObject({ error: 'not_found', details: { stype: 'everything.nope' } });
  });
});

describe('GET /api/stypes/:stype/schema', () => {
  it('serves the JSON Schema as application/schema+json', async () => {
    const { status, type, body } = await get('/api/stypes/everything.get-sum/schema');
    expect(status).toBe(200);
    expect(type).toMatch(/^application\/schema\+json/);
    expect(body).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'everything.get-sum',
      type: 'object',
      required: ['a', 'b'],
    });
    expect(typeof body.title).toBe('string');
    expect(typeof body.description).toBe('string');
    expect(Object.keys(body.properties)).toEqual(['a', 'b']);
  });

  it('answers 404 for an unknown SType', async () => {
    expect((await get('/api/stypes/mcp.nothing/schema')).status).toBe(404);
  });
});

describe('POST /api/validate', () => {
  it('answers 200 valid with the schema version and hash', async () => {
    const { status, body } = await post('/api/validate', { stype: 'everything.echo', payload: { message: 'hi' } });
    expect(status).toBe(200);
    const detail = (await get('/api/stypes/everything.echo')).body;
    expect(body).toEqual({ valid: true, stype: 'everything.echo', schema_version: detail.version, hash: detail.hash });
  });

  it('answers 200 invalid with every error as a JSON path', async () => {
    const { status, body } = await post('/api/validate', { stype: 'everything.get-sum', payload: { a: 'x', c: 1 } });
    expect(status).toBe(200);
    expect(body.valid).toBe(false);
    expect(body.stype).toBe('everything.get-sum');
    expect(body.schema_version).toMatch(/^\d+\.\d+\.\d+/);
    expect(body.hash).toBeUndefined();
    expect(body.errors).toEqual(
      expect.arrayContaining([
        { path: '$.a', message: 'must be number' },
        { path: '$.b', message: 'is required' },
        { path: '$.c', message: 'is not allowed' },
      ]),
    );
    expect(body.errors).toHaveLength(3);
  });

  it('answers 404 stype_not_found with the available STypes', async () => {
    const { status, body } = await post('/api/validate', { stype: 'everything.nope', payload: {} });
    expect(status).toBe(404);
    expect(body.error).toBe('stype_not_found');
    expect(typeof body.message).toBe('string');
    expect(body.available_stypes).toContain('everything.echo');
    expect(body.available_stypes.length).toBeGreaterThanOrEqual(16);
  });

  it.each([
    [{ payload: {} }, 'stype'],
    [{ stype: 'everything.echo' }, 'payload'],
    [{ stype: 42, payload: {} }, 'stype'],
    [{ stype: '', payload: {} }, 'stype'],
    [{ stype: 'everything.echo', payload: [] }, 'payload'],
    [{ stype: 'everything.echo', payload: 'hi' }, 'payload'],
    [{ stype: 'everything.echo', payload: null }, 'payload'],
  ])('answers 400 bad_request naming the field for %j', async (body, field) => {
    const res = await post('/api/validate', body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'bad_request', details: { field } });
  });

  it('answers 400 for a body that is not a JSON object', async () => {
    expect((await post('/api/validate', '{"stype":')).status).toBe(400);
    expect((await post('/api/validate', '[1,2]')).body.error).toBe('bad_request');
  });

  it('can answer an invalid payload with 422 (the typed proxy POST /validate)', async () => {
    const invalid = await post('/validate', { stype: 'everything.echo', payload: {} });
    expect(invalid.status).toBe(422);
    expect(invalid.body).toMatchObject({ valid: false, errors: [{ path: '$.message', message: 'is required' }] });
    const valid = await post('/validate', { stype: 'everything.echo', payload: { message: 'ok' } });
    expect(valid.status).toBe(200);
    expect(valid.body.hash).toMatch(/^sha256:/);
  });
});

describe('GET /api/profiles', () => {
  it('lists the QoM profiles', async () => {
    const { status, body } = await get('/api/profiles');
    expect(status).toBe(200);
    expect(body.profiles.length).toBeGreaterThan(0);
    for (const p of body.profiles) {
      expect(typeof p.name).toBe('string');
      expect(typeof p.description).toBe('string');
      expect(p.threshold).toBeGreaterThanOrEqual(0);
      expect(p.threshold).toBeLessThanOrEqual(1);
      expect(Array.isArray(p.dimensions)).toBe(true);
    }
  });
});

describe('GET /api/search', () => {
  it('answers ranked results with field snippets', async () => {
    const { status, body } = await get('/api/search?q=Sum%20numbers');
    expect(status).toBe(200);
    expect(body.query).toBe('Sum numbers');
    expect(body.total).toBe(body.results.length);
    expect(body.results[0].stype).toBe('everything.get-sum');
    expect(body.results[0].score).toBeGreaterThan(body.results[1]?.score ?? 0);
    expect(body.results[0].score).toBeLessThanOrEqual(1);
    for (const m of body.results[0].matches) {
      expect(typeof m.field).toBe('string');
      expect(typeof m.snippet).toBe('string');
    }
  });

  it.each(['', '?q=', '?q=%20%20'])('answers 400 for a missing or empty q (%s)', async (query) => {
    const { status, body } = await get(`/api/search${query}`);
    expect(status).toBe(400);
    expect(body).toMatchObject({ error: 'bad_request', details: { parameter: 'q' } });
  });
});
