/**
 * POST /admin/reload?scope=data: each resource's and stage's own reload() re-reads its data (here
 * a policy-set's files) without rebuilding the graph; a part whose data is broken keeps its data.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

let svc: StartedService;
const dir = mkdtempSync(join(tmpdir(), 'sy-data-reload-'));
const policies = join(dir, 'policies');

const policy = (name: string) => `name: ${name}\nrules:\n  - id: r\n    when: false\n    action: flag\n`;

beforeAll(async () => {
  const { mkdirSync } = await import('node:fs');
  mkdirSync(policies);
  writeFileSync(join(policies, 'a.yaml'), policy('a'));
  writeFileSync(
    join(dir, 'service.yaml'),
    [
      'service: data-reload',
      'listen: { port: 0 }',
      'admin: { port: 0 }',
      'resources:',
      '  policies: { type: policy-set, dir: ./policies }',
      'routes:',
      '  - match: { method: GET, path: /policies }',
      '    pipeline: [{ policy-api: { set: policies, op: list } }]',
      '',
    ].join('\n'),
  );
  svc = await startService(join(dir, 'service.yaml'));
});
afterAll(() => svc?.close());

const names = async () =>
  ((await (await fetch(`${svc.url}/policies`)).json()).policies as Array<{ name: string }>).map((p) => p.name);
const reloadData = () => fetch(`${svc.adminUrl}/admin/reload?scope=data`, { method: 'POST' });

it('re-reads the data in place, and keeps it when the new data is broken', async () => {
  expect(await names()).toEqual(['a']);
  writeFileSync(join(policies, 'b.yaml'), policy('b'));
  const ok = await reloadData();
  expect(ok.status).toBe(200);
  expect((await ok.json()).reloaded).toContain('resource:policies');
  expect(await names()).toEqual(['a', 'b']);

  const hash = (await (await fetch(`${svc.adminUrl}/admin/config`)).json()).hash;
  writeFileSync(join(policies, 'c.yaml'), 'name: c\nrules:\n  - id: x\n    when: { nope: [] }\n    action: flag\n');
  const bad = await reloadData();
  expect(bad.status).toBe(422);
  const body = await bad.json();
  expect(body.failed[0]).toMatchObject({ target: 'resource:policies' });
  expect(body.failed[0].error).toContain('c.yaml');
  expect(await names()).toEqual(['a', 'b']);
  // The graph was not rebuilt: same config hash.
  expect((await (await fetch(`${svc.adminUrl}/admin/config`)).json()).hash).toBe(hash);
});
