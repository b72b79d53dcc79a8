import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadService } from '../../runtime/config/load.ts';
import { referenceKeyword } from '../../runtime/config/references.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const refStages = join(import.meta.dirname, '../fixtures/ref-stages.ts');

function write(name: string, text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'sy-refs-')), name);
  writeFileSync(file, text);
  return file;
}

async function problemsOf(file: string) {
  try {
    await loadService(file, { env: {} });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => `${p.line}:${p.column} ${p.path}: ${p.message}`);
    throw err;
  }
  return [];
}

describe('references to upstreams, resources and routes', () => {
  it('switchyard validate reports an unknown upstream and an unknown resource at their positions', async () => {
    const file = write(
      'f.yaml',
      `service: refs
listen: { port: 1 }
upstreams:
  backend: { kind: http, url: "http://127.0.0.1:1" }
routes:
  - match: { method: POST, path: /x }
    pipeline:
      - schema-validate: { registry: nope }
      - proxy: { upstream: nope }
`,
    );
    const err = await run('node', ['bin/switchyard.js', 'validate', file], { cwd: root }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr).toContain(
      `${file}:8:38: routes[0].pipeline[0].schema-validate.registry: unknown resource "nope" (none declared under resources:)`,
    );
    expect(err.stderr).toContain(
      `${file}:9:28: routes[0].pipeline[1].proxy.upstream: unknown upstream "nope" (declared: "backend")`,
    );
  });

  it('checks references at any depth of stage and resource options, from the schema alone', async () => {
    const file = write(
      'g.yaml',
      `service: refs
listen: { port: 1 }
plugins: [${refStages}]
upstreams:
  a: { kind: http, url: "http://127.0.0.1:1" }
resources:
  good: { type: test-store, upstream: a }
  bad: { type: test-store, upstream: zz }
routes:
  - id: fan
    match: { path: /x }
    pipeline:
      - test-fanout: { targets: [{ upstream: a }, { upstream: b }], store: missing }
  - match: { path: /cap }
    pipeline:
      - capabilities: { route: fun }
`,
    );
    expect((await problemsOf(file)).sort()).toEqual([
      '13:63 routes[0].pipeline[0].test-fanout.targets[1].upstream: unknown upstream "b" (declared: "a")',
      '13:76 routes[0].pipeline[0].test-fanout.store: unknown resource "missing" (declared: "good", "bad")',
      '16:32 routes[1].pipeline[0].capabilities.route: unknown route "fun" (declared: "fan", "GET /cap")',
      '8:38 resources.bad.upstream: unknown upstream "zz" (declared: "a")',
    ]);
  });

  it('accepts names that are declared', async () => {
    const file = write(
      'h.yaml',
      `service: refs
listen: { port: 1 }
plugins: [${refStages}]
upstreams:
  a: { kind: http, url: "http://127.0.0.1:1" }
resources:
  s: { type: test-store, upstream: a }
routes:
  - match: { path: /x }
    pipeline:
      - test-fanout: { targets: [{ upstream: a }], store: s }
`,
    );
    expect(await problemsOf(file)).toEqual([]);
  });

  it('the editor schema compiles in strict mode once x-ref is registered', () => {
    const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
    addFormats.default(ajv);
    ajv.addKeyword(referenceKeyword);
    const schema = JSON.parse(readFileSync(join(root, 'schemas/service.schema.json'), 'utf8'));
    expect(() => ajv.compile(schema)).not.toThrow();
    expect(JSON.stringify(schema)).toContain('"x-ref":"upstream"');
  });
});
