import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadService } from '../../runtime/config/load.ts';
import { ConfigError } from '../../runtime/config/source.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const stages = join(import.meta.dirname, '../fixtures/test-stages.ts');

function write(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sy-config-'));
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

const minimal = (extra = '') => `service: demo
listen: { port: "\${DEMO_PORT:-8081}" }
plugins: [${stages}]
${extra}
routes:
  - match: { path: /x }
    pipeline:
      - test-echo: { text: "\${GREETING:-hello}-\${NAME}" }
`;

async function problemsOf(file: string, options = {}) {
  try {
    await loadService(file, options);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('config loading', () => {
  it('interpolates ${VAR} and ${VAR:-default} and coerces to the schema type', async () => {
    const file = write('a.yaml', minimal());
    const { config } = await loadService(file, { env: { NAME: 'ada' } });
    expect(config.listen.port).toBe(8081);
    expect(config.routes[0]?.pipeline[0]?.options).toEqual({ text: 'hello-ada' });
    const other = await loadService(file, { env: { NAME: 'ada', DEMO_PORT: '9000', GREETING: 'hi' } });
    expect(other.config.listen.port).toBe(9000);
    expect(other.config.routes[0]?.pipeline[0]?.options).toEqual({ text: 'hi-ada' });
  });

  it('an unset variable without default is an error at its line', async () => {
    const problems = await problemsOf(write('b.yaml', minimal()), { env: {} });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ line: 8, path: 'routes[0].pipeline[0].test-echo.text' });
    expect(problems[0]?.message).toMatch(/NAME is not set/);
  });

  it('--set overrides values, with YAML scalar typing', async () => {
    const file = write('c.yaml', minimal());
    const { config } = await loadService(file, {
      env: { NAME: 'x' },
      set: ['listen.port=7000', 'routes.0.pipeline.0.test-echo.text=over', 'limits.body_bytes=2048'],
    });
    expect(config.listen.port).toBe(7000);
    expect(config.limits.body_bytes).toBe(2048);
    expect(config.routes[0]?.pipeline[0]?.options).toEqual({ text: 'over' });
  });

  it('reports every problem with line, column and path', async () => {
    const file = write(
      'd.yaml',
      `service: demo
listen: { port: 70000 }
dialect: klingon
plugins: [${stages}]
routes:
  - match: { path: /x }
    pipeline:
      - test-echo: { txt: 1 }
      - no-such-plugin: {}
      - test-sleep: {}
`,
    );
    const problems = await problemsOf(file, { env: {} });
    const byPath = Object.fromEntries(problems.map((p) => [p.path, p]));
    expect(byPath['listen.port']).toMatchObject({ line: 2 });
    expect(byPath.dialect).toMatchObject({ line: 3 });
    // Schema errors stop before plugin checks; fix and check again.
    const file2 = write(
      'e.yaml',
      `service: demo\nlisten: { port: 1 }\nplugins: [${stages}]\nroutes:\n  - match: { path: /x }\n    pipeline:\n      - test-echo: { txt: 1 }\n      - no-such-plugin: {}\n      - test-sleep: {}\n`,
    );
    const p2 = await problemsOf(file2, { env: {} });
    expect(p2.map((p) => `${p.line}:${p.path}`).sort()).toEqual([
      '7:routes[0].pipeline[0].test-echo.txt',
      '8:routes[0].pipeline[1].no-such-plugin',
      '9:routes[0].pipeline[2].test-sleep',
    ]);
    expect(p2.find((p) => p.line === 9)?.message).toMatch(/missing required property "ms"/);
  });

  it('reads TOML too', async () => {
    const file = write(
      'f.toml',
      `service = "demo"\n[listen]\nport = 8088\nplugins = []\n[[routes]]\nmatch = { path = "/x" }\npipeline = [{ test-sleep = { ms = 1 } }]\n`,
    );
    const problems = await problemsOf(file);
    // plugins = [] sits under [listen] in TOML: a real mistake, reported at its line.
    expect(problems[0]).toMatchObject({ path: 'listen.plugins', line: 4 });
  });

  it('a YAML syntax error names the line', async () => {
    const problems = await problemsOf(write('g.yaml', 'service: demo\nlisten: { port: 1\nroutes: []\n'));
    expect(problems[0]?.line).toBeGreaterThanOrEqual(2);
  });
});

describe('switchyard validate', () => {
  it('exits 0 for the shipped configs', async () => {
    const { stdout } = await run(
      'node',
      ['bin/switchyard.js', 'validate', 'configs/typed-proxy.yaml', 'configs/registry-api.yaml'],
      { cwd: root },
    );
    expect(stdout).toMatch(/typed-proxy.yaml: ok/);
    expect(stdout).toMatch(/registry-api.yaml: ok/);
  });

  it('prints file:line:column: path: message and exits 1', async () => {
    const file = write('h.yaml', `service: Bad Name\nlisten: { port: 1 }\nroutes: []\n`);
    const err = await run('node', ['bin/switchyard.js', 'validate', file], { cwd: root }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr).toContain(`${file}:1:10: service: must match pattern`);
  });
});
