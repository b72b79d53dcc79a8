import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadService } from '../../runtime/config/load.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';

// The fixture package lives in test/fixtures/esm-only-plugin (node_modules/ is git-ignored); each
// run links it into a node_modules/ next to a config, as `npm install` would.
const fixturePackage = join(import.meta.dirname, '../fixtures/esm-only-plugin');

function serviceDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sy-catalog-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(fixturePackage, join(dir, 'node_modules', 'esm-only-plugin'), 'dir');
  return dir;
}

const config = (plugins: string) => `service: esm
listen: { port: 0 }
plugins: [${plugins}]
routes:
  - match: { path: /x }
    pipeline:
      - esm-only-echo: {}
`;

describe('plugin packages named by a config', () => {
  let dir: string;
  let svc: StartedService;

  beforeAll(async () => {
    dir = serviceDir();
    writeFileSync(join(dir, 'svc.yaml'), config('esm-only-plugin'));
    svc = await startService(join(dir, 'svc.yaml'));
  });
  afterAll(() => svc?.close());

  it('resolves a package whose exports only has an import condition, from the config directory', async () => {
    // What used to fail: CommonJS resolution finds no entry point in such a package.
    expect(() => createRequire(join(dir, 'x.js')).resolve('esm-only-plugin')).toThrow();
    const res = await fetch(`${svc.url}/x`);
    expect(await res.json()).toEqual({ text: 'from an ESM-only package' });
  });

  it('a package that is not installed is a config error naming it', async () => {
    const file = join(serviceDir(), 'svc.yaml');
    writeFileSync(file, config('not-installed-plugin'));
    const err = await loadService(file).catch((e) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.problems[0]).toMatchObject({ path: 'plugins', line: 3 });
    expect(err.problems[0].message).toMatch(/plugin package "not-installed-plugin" not found/);
  });
});
