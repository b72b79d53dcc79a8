/**
 * `serve --watch`: a service reloads (the same transaction as POST /admin/reload) when its config
 * file or a file in its directory changes; bursts of changes make one reload; files the gateway
 * writes next to its config (SQLite databases, journals) and editor droppings do not count.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Gateway } from '../../runtime/gateway.ts';
import { isIgnoredChange, watchConfig } from '../../runtime/service/watch.ts';
import { until } from '../helpers/servers.ts';

const probes = join(import.meta.dirname, 'fixtures/runtime-probes.ts');

function serviceYaml(label: string): string {
  return `service: watch-test
listen: { port: 0 }
plugins: [${JSON.stringify(probes)}]
routes:
  - match: { method: GET, path: /who }
    pipeline: [{ whoami: { label: ${label} } }]
`;
}

describe('serve --watch', () => {
  let dir: string;
  let file: string;
  let gateway: Gateway;
  let url: string;
  const lines: Array<{ msg: string; ok?: boolean; changed?: unknown }> = [];
  const reloads = () => lines.filter((l) => l.msg === 'config reloaded' || l.msg.startsWith('config reload failed'));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sy-watch-'));
    mkdirSync(join(dir, 'data'));
    file = join(dir, 'service.yaml');
    writeFileSync(file, serviceYaml('one'));
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    gateway = await Gateway.start([file], { set: ['listen.port=0'], logger: pino(sink), watch: true });
    url = gateway.services[0]?.info.mainUrl as string;
  });
  afterAll(() => gateway?.close());

  const label = async () => ((await (await fetch(`${url}/who`)).json()) as { label: string }).label;

  it('reloads when the config file changes, once for a burst of writes', async () => {
    const before = reloads().length;
    writeFileSync(file, serviceYaml('two'));
    writeFileSync(file, serviceYaml('two '));
    writeFileSync(file, serviceYaml('two'));
    await until(async () => (await label()) === 'two', 5000);
    await new Promise((r) => setTimeout(r, 600)); // any second reload would have happened by now
    expect(reloads().length - before).toBe(1);
    expect(gateway.services[0]?.lastReload).toMatchObject({ ok: true, changed: true });
  });

  it('reloads when a file in the config directory tree changes', async () => {
    const before = reloads().length;
    writeFileSync(join(dir, 'data', 'tenants.yaml'), 'a: 1\n');
    await until(() => reloads().length > before, 5000);
    expect(
      lines.some((l) => l.msg === 'config change seen: reloading' && l.changed === join('data', 'tenants.yaml')),
    ).toBe(true);
  });

  it('a broken edit changes nothing, the next good one is picked up', async () => {
    const before = reloads().length;
    writeFileSync(file, `${serviceYaml('three')}bogus: true\n`);
    await until(() => reloads().length > before, 5000);
    expect(gateway.services[0]?.lastReload).toMatchObject({ ok: false });
    expect(await label()).toBe('two');
    writeFileSync(file, serviceYaml('three'));
    await until(async () => (await label()) === 'three', 5000);
  });

  it('ignores databases, journals, dot files and editor backups next to the config', async () => {
    const before = reloads().length;
    const names = [
      'audit.db',
      'audit.db-wal',
      'audit.db-journal',
      'gateway.log',
      '.service.yaml.swp',
      'service.yaml~',
      '4913',
    ];
    for (const name of names) {
      writeFileSync(join(dir, name), 'x');
    }
    await new Promise((r) => setTimeout(r, 700));
    expect(reloads().length).toBe(before);
  });
});

describe('watchConfig', () => {
  it('debounces: a burst of changes is one call, with a changed path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-watch-unit-'));
    const file = join(dir, 'svc.yaml');
    writeFileSync(file, 'a: 1\n');
    const seen: string[] = [];
    const watcher = watchConfig(file, (changed) => seen.push(changed), { debounceMs: 100 });
    try {
      expect(watcher.mode).toBe('recursive');
      writeFileSync(file, 'a: 2\n');
      writeFileSync(join(dir, 'other.yaml'), 'b: 1\n');
      await until(() => seen.length > 0, 3000);
      await new Promise((r) => setTimeout(r, 250));
      expect(seen).toHaveLength(1);
      expect(['svc.yaml', 'other.yaml']).toContain(seen[0]);
    } finally {
      watcher.close();
    }
  });

  it('ignore rules', () => {
    for (const p of [
      'x.db',
      'x.sqlite',
      'x.db-wal',
      'x.db-shm',
      '.git/HEAD',
      'node_modules/a/b.js',
      'a.yaml~',
      '.a.yaml.swp',
      'sub/4913',
    ]) {
      expect(isIgnoredChange(p), p).toBe(true);
    }
    for (const p of ['service.yaml', 'registry/stypes/echo.yaml', 'policies/deny.json', 'tenants.toml']) {
      expect(isIgnoredChange(p), p).toBe(false);
    }
  });
});
