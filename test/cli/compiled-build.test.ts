/**
 * The compiled build (`npm run build` → dist/): what a production install runs, without tsx.
 * Built here from the sources, then real services are started from it: the ranking service (its
 * Bradley–Terry fits run in a worker thread, whose entry must find the compiled code) and the
 * typed proxy (its stdio upstream child, the plugin catalog loaded from dist/plugins).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), 'sy-compiled-'));
const children: ChildProcess[] = [];

/** `serve` from dist/; resolves to the main URL the banner names. */
async function serveCompiled(config: string, set: string[]): Promise<string> {
  const child = spawn(
    process.execPath,
    [join(root, 'bin/switchyard.js'), 'serve', config, ...set.flatMap((s) => ['--set', s])],
    {
      cwd: root,
      env: { ...process.env, SWITCHYARD_RUN: 'dist', SWITCHYARD_RUN_DIR: join(work, 'run'), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const url = /^\S+: (http:\/\/127\.0\.0\.1:\d+)/m.exec(stderr)?.[1];
    if (url) return url;
    if (child.exitCode !== null) throw new Error(`serve exited: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no banner: ${stderr}`);
}

describe('compiled build', () => {
  beforeAll(async () => {
    await run(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, timeout: 120_000 });
  }, 150_000);
  afterAll(() => {
    for (const c of children) c.kill('SIGTERM');
  });

  it('emits JavaScript for the runtime, every plugin and their worker entries', () => {
    for (const file of [
      'dist/runtime/cli/main.js',
      'dist/plugins/proxy/index.js',
      'dist/plugins/elo/fit-worker.js',
      'dist/plugins/embed/session-worker.js',
      'dist/plugins/content-fetcher/extract-worker.mjs',
      'dist/plugins/stype-registry/schemas/stype.schema.json',
    ]) {
      expect(existsSync(join(root, file)), file).toBe(true);
    }
  });

  it('answers --version from dist', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'bin/switchyard.js'), '--version'], {
      env: { ...process.env, SWITCHYARD_RUN: 'dist' },
    });
    expect(stdout).toMatch(/^switchyard \d+\.\d+\.\d+\n$/);
  });

  it('serves the ranking service, Bradley–Terry fits in the compiled worker included', async () => {
    const url = await serveCompiled('configs/ranking.yaml', [
      'listen.port=0',
      'metrics.port=0',
      `resources.db.path=${join(work, 'ranking.db')}`,
    ]);
    const post = (path: string, body: unknown) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const ids: number[] = [];
    for (const name of ['a', 'b', 'c']) {
      const res = await post('/entities/', { name, description: name });
      expect(res.status).toBe(200);
      ids.push(((await res.json()) as { id: number }).id);
    }
    const [a, b, c] = ids as [number, number, number];
    for (const [x, y, w] of [
      [a, b, a],
      [b, c, b],
      [a, c, a],
      [c, a, a],
    ]) {
      expect((await post('/comparisons/', { entity1_id: x, entity2_id: y, selected_entity_id: w })).status).toBe(200);
    }
    const board = await fetch(`${url}/leaderboard/?method=bradley-terry&bootstrap=20&seed=1`);
    expect(board.status).toBe(200);
    const rows = (await board.json()) as Array<{ id?: number; entity_id?: number }>;
    expect(rows).toHaveLength(3);
  }, 60_000);

  it('serves the typed proxy with its stdio upstream', async () => {
    const url = await serveCompiled('configs/typed-proxy.yaml', [
      'listen.port=0',
      'metrics.port=0',
      'admin.port=0',
      `resources.audit.path=${join(work, 'audit.db')}`,
    ]);
    let health: { status?: string } = {};
    for (let i = 0; i < 100 && health.status !== 'healthy'; i++) {
      health = (await (await fetch(`${url}/health`)).json()) as { status?: string };
      if (health.status !== 'healthy') await new Promise((r) => setTimeout(r, 100));
    }
    expect(health).toMatchObject({ status: 'healthy' });
  }, 60_000);
});
