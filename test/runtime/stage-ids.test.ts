import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const stages = join(import.meta.dirname, '../fixtures/test-stages.ts');

describe('stage ids', () => {
  let svc: StartedService;

  beforeAll(async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sy-ids-')), 'ids.yaml');
    writeFileSync(
      file,
      `service: ids
listen: { port: 0 }
metrics: { port: 0 }
plugins: [${stages}]
pipeline:
  - test-sleep: { ms: 0 }
routes:
  - id: twice
    match: { path: /twice }
    pipeline:
      - test-fail: {}
        on_error: fail-open
      - test-sleep: { ms: 0 }
      - test-fail: {}
        on_error: fail-open
      - test-echo: {}
`,
    );
    svc = await startService(file);
  });
  afterAll(() => svc?.close());

  it('are unique when a plugin appears twice in one pipeline, numbered in config order', () => {
    const ids = svc.runtime.graph.routes[0]?.stages.map((s) => s.id);
    expect(ids).toEqual([
      'service:test-sleep',
      'twice:test-fail',
      'twice:test-sleep',
      'twice:test-fail.2',
      'twice:test-echo',
    ]);
  });

  it('label each stage separately in metrics and in what the request reports', async () => {
    const body = await (await fetch(`${svc.url}/twice`)).json();
    expect(body.failed_open).toEqual(['twice:test-fail', 'twice:test-fail.2']);
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_stage_failures_total\{[^}]*stage="twice:test-fail"[^}]*\} 1/);
    expect(metrics).toMatch(/switchyard_stage_failures_total\{[^}]*stage="twice:test-fail.2"[^}]*\} 1/);
  });

  it('stay the same when the graph is rebuilt by a reload', async () => {
    const before = svc.runtime.graph;
    expect((await svc.runtime.reload()).ok).toBe(true);
    expect(svc.runtime.graph).not.toBe(before);
    expect(svc.runtime.graph.routes[0]?.stages.map((s) => s.id)).toEqual([
      'service:test-sleep',
      'twice:test-fail',
      'twice:test-sleep',
      'twice:test-fail.2',
      'twice:test-echo',
    ]);
  });
});

describe('inactive stages', () => {
  it('are off the request path, yet listed and described', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sy-inactive-')), 'inactive.yaml');
    writeFileSync(
      file,
      `service: inactive
listen: { port: 0 }
plugins: [${stages}]
routes:
  - id: off
    match: { path: /off }
    pipeline:
      - test-fail: { inactive: true }
      - test-echo: { text: reached }
`,
    );
    const svc = await startService(file);
    try {
      const res = await fetch(`${svc.url}/off`);
      expect(res.status).toBe(200);
      expect((await res.json()).text).toBe('reached');
      const stage = svc.runtime.graph.routes[0]?.stages[0];
      expect(stage?.id).toBe('off:test-fail');
      expect(stage?.instance.describe?.()).toEqual({ inactive: true });
    } finally {
      await svc.close();
    }
  });
});
