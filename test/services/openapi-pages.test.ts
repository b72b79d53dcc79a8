/**
 * Every HTTP service of the stack publishes an OpenAPI 3.1 description of its routes at
 * /openapi.json and Swagger UI at /docs, started from its shipped config.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const data = mkdtempSync(join(tmpdir(), 'sy-openapi-'));
const services: Array<{ config: string; set?: string[]; env?: Record<string, string>; paths: string[] }> = [
  {
    config: 'configs/typed-proxy.yaml',
    set: [`resources.audit.path=${join(data, 'proxy-audit.db')}`],
    paths: ['/', '/mcp', '/validate', '/capabilities', '/health'],
  },
  { config: 'configs/registry-api.yaml', paths: ['/api/stypes', '/api/stypes/{stype}', '/api/validate'] },
  {
    config: 'configs/safety-filter.yaml',
    set: [`resources.audit.path=${join(data, 'filter-audit.db')}`],
    paths: ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/admin/classifiers', '/audit'],
  },
  { config: 'configs/search.yaml', paths: ['/v1/search', '/health'] },
  { config: 'configs/datastore.toml', env: { DB_STORAGE_PATH: join(data, 'datastore.db') }, paths: [] },
  { config: 'configs/ranking.yaml', set: [`resources.db.path=${join(data, 'ranking.db')}`], paths: ['/entities/'] },
  { config: 'configs/embedding.yaml', paths: ['/v1/embed'] },
];

const started: StartedService[] = [];
afterAll(async () => {
  await Promise.allSettled(started.map((s) => s.close()));
});

describe.each(services)('$config', ({ config, set, env, paths }) => {
  it('answers /openapi.json (OpenAPI 3.1, its routes, every $ref resolving) and /docs', async () => {
    const svc = await startService(config, { set, env: { ...process.env, ...env }, warmupMs: 500 });
    started.push(svc);
    const res = await fetch(`${svc.url}/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      openapi: string;
      paths: Record<string, Record<string, { responses?: object }>>;
      components?: { schemas?: Record<string, unknown> };
    };
    expect(doc.openapi).toMatch(/^3\.1\./);
    for (const p of paths) expect(doc.paths[p], `${config} ${p}`).toBeDefined();
    expect(Object.keys(doc.paths).length).toBeGreaterThan(0);
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (method === 'parameters' || method === 'summary' || method === 'description') continue;
        expect(op.responses, `${method} ${p}`).toBeDefined();
      }
    }
    for (const m of JSON.stringify(doc).matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
      expect(doc.components?.schemas?.[m[1] as string], m[1]).toBeDefined();
    }
    const page = await fetch(`${svc.url}/docs/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toMatch(/swagger-ui/i);
  }, 60_000);
});
