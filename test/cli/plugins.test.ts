/** `switchyard plugins`: what a plugin author or operator looks up before writing a stage in YAML. */
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../runtime/cli/io.ts';
import { plugins } from '../../runtime/cli/plugins.ts';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    env: {},
  };
  const code = await plugins(args, io);
  return { code, out, err };
}

describe('switchyard plugins', () => {
  it('lists every stage plugin and resource type with the folder that defines it', async () => {
    const { code, out } = await run(['--json']);
    expect(code).toBe(0);
    const list = JSON.parse(out) as Array<{ name: string; kind: string; folder: string }>;
    expect(list).toContainEqual(
      expect.objectContaining({ name: 'tenant-auth', kind: 'stage', folder: 'plugins/tenants' }),
    );
    expect(list).toContainEqual(
      expect.objectContaining({ name: 'entity-store', kind: 'resource', folder: 'plugins/entity-store' }),
    );
    expect(list.length).toBeGreaterThan(50);
  });

  it('shows one plugin: options with types and defaults, required ones marked, needs and provides', async () => {
    const { code, out } = await run(['schema-validate']);
    expect(code).toBe(0);
    expect(out).toMatch(/^schema-validate \(stage plugin, plugins\/schema-validate\)/);
    expect(out).toMatch(/needs: .*stype/);
    expect(out).toMatch(/^registry \*\s+string/m);
    expect(out).toMatch(/^argument_errors\s+"jsonrpc" \| "tool-result"\s+"jsonrpc"/m);
  });

  it('suggests the closest name for a typo', async () => {
    const { code, err } = await run(['rate-limt']);
    expect(code).toBe(2);
    expect(err).toBe('switchyard plugins: no plugin or resource type "rate-limt" (did you mean "rate-limit"?)\n');
  });
});

describe('plugin folder READMEs', () => {
  it('every plugin folder has its README, current with the definitions (scripts/plugin-readmes.ts)', async () => {
    const { readFileSync, existsSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { readmes } = await import('../../scripts/plugin-readmes.ts');
    const root = join(import.meta.dirname, '../..');
    const stale: string[] = [];
    for (const [file, text] of await readmes()) {
      const path = join(root, file);
      if (!existsSync(path) || readFileSync(path, 'utf8') !== text) stale.push(file);
    }
    expect(stale, 'run: npx tsx scripts/plugin-readmes.ts').toEqual([]);
  });
});
