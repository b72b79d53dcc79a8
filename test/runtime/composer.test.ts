/**
 * One composer (runtime/service/pipeline.ts) for every way into a pipeline: the request core, the
 * upgrade path and the test harness. `next()` twice is refused; the upgrade path's request state
 * is the request core's (every field `coreStateFields` promises).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadService } from '../../runtime/config/load.ts';
import { coreStateFields, type Stage } from '../../runtime/index.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { seen } from '../fixtures/composer/stages.ts';
import { requestState, serveStages } from '../helpers/stage-harness.ts';

describe('next() called twice', () => {
  it('is refused as the stage failing, and the stages after it ran once', async () => {
    let terminal = 0;
    const twice: Stage = async (_ctx, next) => {
      await next();
      await next();
    };
    const answer: Stage = async (ctx) => {
      terminal++;
      ctx.body = { n: terminal };
    };
    const server = await serveStages([twice, answer]);
    try {
      const res = await fetch(`${server.url}/`);
      expect(res.status).toBe(500);
      expect(await res.json()).toMatchObject({ error: 'internal_error', details: { stage: 'twice' } });
      expect(terminal).toBe(1);
      const failures = await server.metrics.registry.getSingleMetricAsString('switchyard_stage_failures_total');
      expect(failures).toContain('plugin="twice"');
    } finally {
      server.close();
    }
  });

  it('once is fine', async () => {
    const once: Stage = (_ctx, next) => next();
    const answer: Stage = async (ctx) => {
      ctx.body = { ok: true };
    };
    const server = await serveStages([once, answer]);
    try {
      expect((await fetch(`${server.url}/`)).status).toBe(200);
    } finally {
      server.close();
    }
  });
});

const yaml = (plugins: string) => `
service: composer-test
listen: { port: 0 }
plugins: [${plugins}]
routes:
  - match: { method: GET, path: /ws }
    pipeline:
      - test-state-probe: {}
      - test-upgrade-refuser: {}
`;

describe("a plugin's declared on_uninspectable", () => {
  it('applies when the config says nothing, and the config still wins', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'composer-'));
    const file = join(dir, 'service.yaml');
    writeFileSync(
      file,
      `service: observer-test
listen: { port: 0 }
plugins: [${join(import.meta.dirname, '../fixtures/composer/stages.ts')}]
routes:
  - match: { method: GET, path: /a }
    pipeline:
      - test-observer: {}
      - test-observer: {}
        on_uninspectable: refuse
      - test-state-probe: {}
      - test-upgrade-refuser: {}
`,
    );
    const { config } = await loadService(file);
    expect(config.routes[0]?.pipeline.map((s) => s.onUninspectable)).toEqual(['pass', 'refuse', 'refuse', 'refuse']);
  });
});

describe('the upgrade path starts the request state the request core does', () => {
  let svc: StartedService;
  beforeAll(async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'composer-')), 'service.yaml');
    writeFileSync(file, yaml(join(import.meta.dirname, '../fixtures/composer/stages.ts')));
    svc = await startService(file);
  });
  afterAll(() => svc?.close());

  it('same fields, of the same types, on a plain request and on a handshake', async () => {
    const plain = await fetch(`${svc.url}/ws`, { headers: { 'x-request-id': 'plain-1' } });
    expect(plain.status).toBe(200);
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${svc.url}/ws`, {
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
          'x-request-id': 'upgrade-1',
        },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('upgrade', () => reject(new Error('upgraded')));
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(403);
    const handler = seen.get('plain-1');
    const upgrade = seen.get('upgrade-1');
    expect(handler).toBeDefined();
    expect(upgrade).toEqual(handler);
    for (const field of coreStateFields) {
      if (field === 'mode') continue; // set only when the route or service names one
      expect(Object.keys(upgrade ?? {})).toContain(field);
    }
    expect(upgrade?.traceparent_ok).toBe('true');
  });

  it('the test harness starts the same fields', () => {
    const harness = requestState();
    for (const field of coreStateFields) {
      if (field === 'mode') continue;
      expect(Object.keys(harness)).toContain(field);
    }
  });
});
