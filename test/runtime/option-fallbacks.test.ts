/**
 * No plugin repeats a schema default in code (`options.x ?? 30` where the schema says
 * `default: 30`): the runtime applies every default before `create` (plugin-options.test.ts), so
 * such a fallback is dead code that drifts from the schema the day one of them changes.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalog } from '../../runtime/catalog.ts';
import { schemaDefaults, schemaFallbacks } from '../helpers/schema-fallbacks.ts';

const schema = {
  type: 'object',
  properties: {
    size: { type: 'integer', default: 10 },
    tags: { type: 'array', items: { type: 'string' }, default: ['a', 'b'] },
    mode: { enum: ['fast', 'exact'], default: 'fast' },
    failure: { type: 'object', default: {}, properties: { message: { type: 'string', default: 'failed' } } },
  },
};

describe('no plugin repeats a schema default', () => {
  it('no `options.x ?? <default>` nor `{ x = <default> }` in plugins/ equals its schema default, nor falls back to a named constant', async () => {
    const root = join(import.meta.dirname, '../..');
    const catalog = await loadCatalog();
    const byFolder = new Map<string, Map<string, Set<string>>>();
    for (const def of catalog.all()) {
      const folder = catalog.origin(def);
      byFolder.set(folder, schemaDefaults(def.options, byFolder.get(folder)));
    }
    expect(byFolder.size).toBeGreaterThan(30);
    const found = [...byFolder].flatMap(([folder, defaults]) => schemaFallbacks(join(root, folder), defaults, root));
    expect(found.map((f) => `${f.file}:${f.line} ${f.code}`)).toEqual([]);
  });

  it('the check finds a repeated default, and lets an explained one pass', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fallbacks-'));
    writeFileSync(
      join(dir, 'index.ts'),
      [
        'const a = options.size ?? 10;',
        "const b = options.failure?.message ?? 'failed';",
        'const { size = 10 } = options;',
        'const c = options.size ?? 11;',
        '// not the schema default: a value read from a request body',
        "const d = body.mode ?? 'fast';",
        "const e = options.tags ?? ['a', 'b'];",
        'const f = options.size ?? DEFAULTS.size;',
        'const g = options.size ?? DEFAULT_SIZE;',
        "const h = options.tags ?? ['a'];",
        'const i = options.size ?? Number.MAX_SAFE_INTEGER;',
      ].join('\n'),
    );
    const found = schemaFallbacks(dir, schemaDefaults(schema), dir);
    expect(found.map((f) => [f.line, f.name])).toEqual([
      [1, 'size'],
      [2, 'message'],
      [3, 'size'],
      [7, 'tags'],
      [8, 'size'],
      [9, 'size'],
    ]);
  });
});
