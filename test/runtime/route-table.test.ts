import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const stages = join(import.meta.dirname, '../fixtures/test-stages.ts');

// A parameter route declared before a literal one that it also matches, the same literal path
// with another method further down, and a plain literal route.
const config = `
service: routes
listen: { port: 0 }
plugins: [${JSON.stringify(stages)}]
routes:
  - match: { method: GET, path: /things/:id }
    pipeline: [{ test-echo: { text: by-id } }]
  - match: { method: GET, path: /things/special }
    pipeline: [{ test-echo: { text: special } }]
  - match: { method: [POST, PUT], path: /things/special }
    pipeline: [{ test-echo: { text: special-write } }]
  - match: { method: GET, path: /health }
    pipeline: [{ test-echo: { text: health } }]
  - match: { method: GET, path: /later/:x }
    pipeline: [{ test-echo: { text: later } }]
`;

describe('routes resolved at load (route-table.ts)', () => {
  let svc: StartedService;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-routes-'));
    const file = join(dir, 'routes.yaml');
    writeFileSync(file, config);
    svc = await startService(file);
  });
  afterAll(() => svc?.close());

  const text = async (path: string, method = 'GET') => {
    const write = method === 'POST' || method === 'PUT';
    const res = await fetch(`${svc.url}${path}`, {
      method,
      ...(write ? { body: '{}', headers: { 'content-type': 'application/json' } } : {}),
    });
    const read = res.status === 200 && method !== 'HEAD';
    return { status: res.status, body: read ? ((await res.json()) as { text: string }).text : undefined, res };
  };

  it('chooses the route the config order chooses: a parameter route before a literal one wins its path', async () => {
    expect(await text('/things/special')).toMatchObject({ status: 200, body: 'by-id' });
    expect(await text('/things/special', 'POST')).toMatchObject({ status: 200, body: 'special-write' });
    expect(await text('/things/other')).toMatchObject({ status: 200, body: 'by-id' });
    expect(await text('/health')).toMatchObject({ status: 200, body: 'health' });
    expect(await text('/later/a')).toMatchObject({ status: 200, body: 'later' });
  });

  it('matches other spellings of a literal path as the pattern does (case, trailing slash)', async () => {
    expect(await text('/HEALTH')).toMatchObject({ status: 200, body: 'health' });
    expect(await text('/health/')).toMatchObject({ status: 200, body: 'health' });
    expect(await text('/health', 'HEAD')).toMatchObject({ status: 200 });
  });

  it('405 names every method of every route matching the path; 404 past them', async () => {
    const { status, res } = await text('/things/special', 'DELETE');
    expect(status).toBe(405);
    expect(res.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'POST', 'PUT']);
    expect((await text('/nothing')).status).toBe(404);
  });

  it('tries only the routes that match a literal path, not every pattern (counted)', async () => {
    const routes = svc.runtime.graph.routes;
    let calls = 0;
    for (const route of routes) {
      const match = route.match;
      route.match = (path) => {
        calls++;
        return match(path);
      };
    }
    // The one route that matches; the full scan would have asked the four before it too.
    calls = 0;
    await text('/health');
    expect(calls).toBe(1);
    // A path no route declares literally: every pattern, in order, as before.
    calls = 0;
    await text('/later/a');
    expect(calls).toBe(routes.length);
  });
});
