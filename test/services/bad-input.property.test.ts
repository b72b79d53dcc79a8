/**
 * Property: whatever body is thrown at the typed proxy and the registry API, only documented
 * statuses come back — never a 500, never a dropped connection.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const configs = join(import.meta.dirname, '../../configs');

const documented: Record<string, number[]> = {
  '/': [200, 202, 400, 403, 413, 422, 502, 504],
  '/validate': [200, 400, 404, 413, 422],
  '/mcp': [200, 400, 403, 404, 413, 422, 502, 504],
  '/api/validate': [200, 400, 404, 413],
};

const safeTools = ['echo', 'get-sum', 'get-env', 'get-tiny-image', 'no-such-tool'];
const methods = ['tools/call', 'tools/list', 'resources/list', 'prompts/list', 'ping', 'unknown/method'];

/** Bodies: raw bytes, arbitrary JSON, and near-valid messages with random holes in them. */
const body = fc.oneof(
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  fc.string({ maxLength: 200 }),
  fc.json({ maxDepth: 6 }),
  fc
    .record(
      {
        jsonrpc: fc.oneof(fc.constant('2.0'), fc.anything()),
        id: fc.oneof(fc.integer(), fc.string(), fc.constant(null), fc.anything()),
        method: fc.oneof(fc.constantFrom(...methods), fc.string()),
        params: fc.oneof(
          fc.record({ name: fc.constantFrom(...safeTools), arguments: fc.oneof(fc.object(), fc.anything()) }),
          fc.anything(),
        ),
        type: fc.oneof(fc.constantFrom(...methods), fc.anything()),
        tool: fc.oneof(fc.constantFrom(...safeTools), fc.anything()),
        arguments: fc.oneof(fc.object(), fc.anything()),
        metadata: fc.oneof(fc.record({ stype: fc.string(), qom_profile: fc.string() }), fc.anything()),
        stype: fc.oneof(fc.constantFrom('everything.echo', 'everything.get-sum', 'nope'), fc.anything()),
        payload: fc.oneof(fc.object(), fc.anything()),
      },
      { requiredKeys: [] },
    )
    .map((o) => JSON.stringify(o)),
);

describe('bad input never gets an undocumented status', () => {
  let proxy: StartedService;
  let registry: StartedService;
  beforeAll(async () => {
    [proxy, registry] = await Promise.all([
      startService(join(configs, 'typed-proxy.yaml'), {
        warmupMs: 15000,
        set: ['upstreams.everything.call_timeout_ms=5000'],
      }),
      startService(join(configs, 'registry-api.yaml')),
    ]);
  });
  afterAll(async () => {
    await Promise.all([proxy?.close(), registry?.close()]);
  });

  for (const path of Object.keys(documented)) {
    it(`POST ${path}`, async () => {
      const base = () => (path === '/api/validate' ? registry.url : proxy.url);
      await fc.assert(
        fc.asyncProperty(body, async (b) => {
          const res = await fetch(`${base()}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: typeof b === 'string' ? b : new Uint8Array(b as Buffer),
          });
          await res.arrayBuffer();
          expect(documented[path]).toContain(res.status);
        }),
        { numRuns: 120 },
      );
    }, 120_000);
  }
});
