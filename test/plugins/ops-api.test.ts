import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceRuntime } from '../../runtime/service/runtime.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

const fixtures = join(import.meta.dirname, '../fixtures');
const ops = join(fixtures, 'ops.yaml');
const token = 'test-admin-token';

describe('ops-api', () => {
  let svc: StartedService;
  const get = (path: string, headers: Record<string, string> = { 'x-admin-token': token }) =>
    fetch(`${svc.url}${path}`, { headers });

  beforeAll(async () => {
    svc = await startService(ops);
  });
  afterAll(() => svc?.close());

  it('needs the admin token in X-Admin-Token or Authorization: Bearer', async () => {
    const missing = await get('/admin/status', {});
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({
      error: 'unauthorized',
      message: 'Missing token in header X-Admin-Token (or Authorization: Bearer)',
      details: { header: 'X-Admin-Token' },
    });
    const wrong = await get('/admin/status', { 'x-admin-token': `${token}x` });
    expect(wrong.status).toBe(401);
    expect((await wrong.json()).message).toBe('Invalid token');
    expect((await get('/admin/status', { authorization: `Bearer ${token}` })).status).toBe(200);
    expect((await get('/admin/status', { authorization: `Bearer ${token}x` })).status).toBe(401);
    expect((await get('/admin/status', { authorization: token })).status).toBe(401);
    // Unknown admin paths are not revealed without the token either.
    expect((await get('/admin/nothing-here', {})).status).toBe(401);
  });

  it('GET /admin/status: version, uptime, connections against the maximum, memory, CPU', async () => {
    const res = await get('/admin/status');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as {
      version: string;
      uptime_seconds: number;
      connections: { active: number; max: number };
      memory: Record<string, number>;
      cpu: Record<string, number>;
    };
    expect(Object.keys(body).sort()).toEqual(['connections', 'cpu', 'memory', 'uptime_seconds', 'version']);
    expect(body.version).toBe('2.3.4');
    expect(Number.isInteger(body.uptime_seconds)).toBe(true);
    expect(body.connections.max).toBe(16);
    expect(body.connections.active).toBeGreaterThanOrEqual(1);
    expect(Object.keys(body.memory).sort()).toEqual(['heap_total_bytes', 'heap_used_bytes', 'rss_bytes']);
    for (const v of Object.values(body.memory)) expect(v).toBeGreaterThan(0);
    expect(body.memory.heap_used_bytes).toBeLessThanOrEqual(body.memory.heap_total_bytes ?? 0);
    expect(body.cpu.user_seconds).toBeGreaterThan(0);
    expect(body.cpu.system_seconds).toBeGreaterThanOrEqual(0);
    expect(body.cpu.percent).toBeGreaterThanOrEqual(0);
  });

  it('GET /admin/connections lists each client connection with its requests in flight', async () => {
    const other = new Agent();
    const slow = undiciFetch(`${svc.url}/slow`, { dispatcher: other }); // 600 ms on its own connection
    await until(() => svc.runtime.info.connections?.().clients.some((c) => c.in_flight === 1) ?? false, 2000);
    const body = (await (await get('/admin/connections')).json()) as {
      active: number;
      max: number;
      connections: Array<{
        client: string;
        connected_at: string;
        requests: number;
        in_flight: number;
        duration_ms: number;
      }>;
    };
    expect(body.max).toBe(16);
    expect(body.active).toBe(body.connections.length);
    expect(body.active).toBeGreaterThanOrEqual(2);
    // The slow request's connection, and this request's own: both in flight.
    expect(body.connections.filter((c) => c.in_flight === 1).length).toBeGreaterThanOrEqual(2);
    for (const c of body.connections) {
      expect(c.client).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(Number.isNaN(Date.parse(c.connected_at))).toBe(false);
      expect(c.requests).toBeGreaterThanOrEqual(c.in_flight);
      expect(c.duration_ms).toBeGreaterThanOrEqual(0);
    }
    expect((await slow).status).toBe(200);
    await other.close();
  });

  it('passes the store reports through', async () => {
    expect(await (await get('/admin/stats/queries')).json()).toEqual({
      window_seconds: 3600,
      total: 1234,
      errors: 5,
      avg_ms: 2.5,
      p50_ms: 1.2,
      p95_ms: 8.75,
      p99_ms: 31.4,
      top_entities: [
        { entity: 'user', queries: 800 },
        { entity: 'order', queries: 434 },
      ],
    });
    expect(await (await get('/admin/stats/storage')).json()).toMatchObject({
      data_bytes: 12_897_485,
      cache_hit_ratio: 0.95,
    });
    const slow = (await (await get('/admin/slow-queries?limit=2')).json()) as {
      threshold_ms: number;
      queries: unknown[];
    };
    expect(slow.threshold_ms).toBe(100);
    expect(slow.queries).toHaveLength(2);
    expect(slow.queries[0]).toEqual({
      shape: 'find user where email = ?',
      entity: 'user',
      count: 12,
      avg_ms: 180.5,
      max_ms: 912.25,
      last_at: '2026-01-02T03:04:05.000Z',
    });
    // Default 10, and a limit above 1000 is clamped (the fixture has 3).
    expect(((await (await get('/admin/slow-queries')).json()) as { queries: unknown[] }).queries).toHaveLength(3);
    expect((await get('/admin/slow-queries?limit=5000')).status).toBe(200);
  });

  it('answers 400 for a bad limit and 404 for an unknown endpoint', async () => {
    for (const q of ['limit=0', 'limit=abc', 'limit=1.5', 'limit=1&limit=2']) {
      const res = await get(`/admin/slow-queries?${q}`);
      expect(res.status, q).toBe(400);
      expect((await res.json()).details).toMatchObject({ parameter: 'limit' });
    }
    const res = await get('/admin/stats/nothing');
    expect(res.status).toBe(404);
    expect((await res.json()).message).toBe('No admin endpoint GET /admin/stats/nothing');
  });
});

describe('ops-api configuration', () => {
  const service = (ops: string, resources = '') =>
    writeServiceFile(`service: ops-config
listen: { port: 0 }
logging: { level: silent }
plugins: [${JSON.stringify(join(fixtures, 'ops-stages.ts'))}]
${resources}
routes:
  - match: { method: GET, path: "/ops/*rest" }
    pipeline: [{ ops-api: ${ops} }]
`);

  it('without a store, the stats endpoints are 404 no_store; base_path and token_header are options', async () => {
    const runtime = await ServiceRuntime.start(service('{ token: s3cret, token_header: X-Ops, base_path: /ops }'));
    try {
      const headers = { 'x-ops': 's3cret' };
      expect((await fetch(`${runtime.info.mainUrl}/ops/status`, { headers })).status).toBe(200);
      const res = await fetch(`${runtime.info.mainUrl}/ops/stats/queries`, { headers });
      expect(res.status).toBe(404);
      expect((await res.json()).error).toBe('no_store');
      expect(
        (await fetch(`${runtime.info.mainUrl}/ops/status`, { headers: { 'x-admin-token': 's3cret' } })).status,
      ).toBe(401);
    } finally {
      await runtime.close();
    }
  });

  it('refuses to start with an empty token, or a store that gives no reports', async () => {
    await expect(ServiceRuntime.start(service('{ token: "" }'))).rejects.toThrow(/ops-api token is empty/);
    await expect(
      ServiceRuntime.start(service('{ token: t, store: other }', 'resources:\n  other: { type: test-plain-value }')),
    ).rejects.toThrow(/resource "other" has no queryStats, storageStats, slowQueries/);
  });
});
