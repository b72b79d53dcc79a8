/**
 * The registry API, started from configs/registry-api.yaml (a copy, with a copy of the registry,
 * so the reload test can change it).
 */
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const configs = join(import.meta.dirname, '../../configs');

describe('registry API', () => {
  let svc: StartedService;
  let dir: string;
  const get = (path: string) => fetch(`${svc.url}${path}`);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sy-registry-'));
    cpSync(join(configs, 'registry'), join(dir, 'registry'), { recursive: true });
    cpSync(join(configs, 'registry-api.yaml'), join(dir, 'registry-api.yaml'));
    svc = await startService(join(dir, 'registry-api.yaml'));
  });
  afterAll(() => svc?.close());

  it('lists STypes with pagination and a status filter', async () => {
    const all = await (await get('/api/stypes')).json();
    expect(all.pagination).toMatchObject({ page: 1, limit: 20 });
    expect(all.pagination.total).toBe(all.data.length);
    expect(all.data[0]).toEqual(
      expect.objectContaining({
        stype: expect.any(String),
        status: expect.stringMatching(/^(approved|pending)$/),
        version: expect.any(String),
        samples: expect.any(Number),
      }),
    );
    const page = await (await get('/api/stypes?page=2&limit=2')).json();
    expect(page.data).toHaveLength(2);
    expect(page.pagination).toEqual({
      page: 2,
      limit: 2,
      total: all.pagination.total,
      total_pages: Math.ceil(all.pagination.total / 2),
    });
    const pending = await (await get('/api/stypes?status=pending')).json();
    expect(pending.data.length).toBeGreaterThan(0);
    expect(pending.data.every((s: { status: string }) => s.status === 'pending')).toBe(true);
    const approved = await (await get('/api/stypes?status=approved')).json();
    expect(approved.pagination.total + pending.pagination.total).toBe(all.pagination.total);
  });

  it('refuses invalid pagination with 400 naming the parameter', async () => {
    for (const q of ['page=0', 'page=x', 'limit=0', 'status=maybe']) {
      const res = await get(`/api/stypes?${q}`);
      expect(res.status, q).toBe(400);
      expect((await res.json()).error).toBe('bad_request');
    }
  });

  it('serves detail, schema (application/schema+json) and 404s', async () => {
    const detail = await (await get('/api/stypes/everything.echo')).json();
    expect(detail).toMatchObject({
      stype: 'everything.echo',
      namespace: 'everything',
      schema_url: '/api/stypes/everything.echo/schema',
    });
    expect(detail.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Array.isArray(detail.qom_profiles)).toBe(true);
    const schema = await get('/api/stypes/everything.echo/schema');
    expect(schema.headers.get('content-type')).toMatch(/^application\/schema\+json/);
    const doc = await schema.json();
    expect(doc).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'everything.echo',
      type: 'object',
    });
    const missing = await get('/api/stypes/no.such');
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toBe('not_found');
    expect((await get('/api/stypes/no.such/schema')).status).toBe(404);
  });

  it('validates: 200 for valid and invalid, 404 for unknown', async () => {
    const post = (b: unknown) =>
      fetch(`${svc.url}/api/validate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(b),
      });
    const ok = await (await post({ stype: 'everything.echo', payload: { message: 'x' } })).json();
    expect(ok).toMatchObject({ valid: true, stype: 'everything.echo' });
    const badRes = await post({ stype: 'everything.echo', payload: { message: 5 } });
    expect(badRes.status).toBe(200);
    const bad = await badRes.json();
    expect(bad.valid).toBe(false);
    expect(bad.errors[0].path).toBe('$.message');
    expect((await post({ stype: 'x.y', payload: {} })).status).toBe(404);
  });

  it('lists QoM profiles', async () => {
    const { profiles } = await (await get('/api/profiles')).json();
    expect(profiles.length).toBeGreaterThan(0);
    for (const p of profiles) {
      expect(p.threshold).toBeGreaterThanOrEqual(0);
      expect(p.threshold).toBeLessThanOrEqual(1);
    }
  });

  it('searches names, descriptions and schema content; 400 on empty q', async () => {
    const res = await (await get('/api/search?q=echo')).json();
    expect(res.query).toBe('echo');
    expect(res.total).toBe(res.results.length);
    expect(res.results[0].stype).toBe('everything.echo');
    expect(res.results[0].matches[0]).toEqual({ field: expect.any(String), snippet: expect.stringMatching(/echo/i) });
    expect((await get('/api/search?q=')).status).toBe(400);
    expect((await get('/api/search')).status).toBe(400);
  });

  it('picks up a registry change on reload', async () => {
    const src = join(dir, 'registry/stypes/everything.echo.yaml');
    const text = readFileSync(src, 'utf8');
    writeFileSync(
      join(dir, 'registry/stypes/everything.echo-copy.yaml'),
      text
        .replace(/id: everything\.echo\b/, 'id: everything.echo-copy')
        .replace(/\$id: everything\.echo\b/, '$id: everything.echo-copy')
        .replace(/tool: echo\b/, 'tool: echo-copy'),
    );
    const before = (await (await get('/api/stypes?limit=100')).json()).pagination.total;
    const res = await fetch(`${svc.adminUrl}/admin/reload`, { method: 'POST' });
    expect((await res.json()).ok).toBe(true);
    const after = (await (await get('/api/stypes?limit=100')).json()).pagination.total;
    expect(after).toBe(before + 1);
    expect((await get('/api/stypes/everything.echo-copy')).status).toBe(200);
  });
});
