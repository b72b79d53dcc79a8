/**
 * The README's examples, run as written against `npm start` (the seven services on their
 * documented ports, data in a temporary directory): every `curl` and `node bin/switchyard.js`
 * line of its shell blocks must run (exit 0: no shell globbing trap, no refused connection) and
 * get an answer that is not "no such route". Examples that need what this machine lacks (a model
 * runtime, SearXNG, embedding model files) must still answer, with the error they document.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const run = promisify(execFile);
const data = mkdtempSync(join(tmpdir(), 'sy-readme-'));
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  SWITCHYARD_RUN_DIR: join(data, 'run'),
  PROXY_AUDIT_PATH: join(data, 'proxy-audit.db'),
  FILTER_AUDIT_PATH: join(data, 'filter-audit.db'),
  DB_STORAGE_PATH: join(data, 'datastore.db'),
  RANK_DB_PATH: join(data, 'ranking.db'),
  LOG_LEVEL: 'warn',
};

/** The command lines of the README's ```sh blocks that talk to the running stack, in order. */
function examples(): string[] {
  const text = readFileSync(join(root, 'README.md'), 'utf8');
  const lines: string[] = [];
  for (const block of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const joined = (block[1] ?? '').replace(/\\\n\s*/g, ' ');
    for (const raw of joined.split('\n')) {
      const line = raw.trim();
      if (/^curl\s/.test(line) || /^node bin\/switchyard\.js (admin|health|config|ps)\b/.test(line)) lines.push(line);
    }
  }
  return lines;
}

let stack: ChildProcess;

describe('README examples against npm start', () => {
  beforeAll(async () => {
    stack = spawn('npm', ['start'], { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    let stderr = '';
    stack.stderr?.on('data', (d) => {
      stderr += d;
    });
    const deadline = Date.now() + 60_000;
    while (!/^search: http/m.test(stderr)) {
      if (stack.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not come up: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 90_000);
  afterAll(() => {
    if (stack?.pid) process.kill(-stack.pid, 'SIGTERM');
  });

  it('every example runs and is answered by a route that exists', async () => {
    const lines = examples();
    expect(lines.length).toBeGreaterThan(20);
    for (const line of lines) {
      // As a reader runs it: a shell, the comment after # ignored by it.
      const { stdout, stderr, code } = await run('bash', ['-c', line], { cwd: root, env, timeout: 30_000 }).then(
        (r) => ({ ...r, code: 0 }),
        (e: { stdout: string; stderr: string; code: number }) => e,
      );
      expect(code, `${line}\n${stderr}`).toBe(0);
      expect(stdout.trim(), line).not.toBe('');
      expect(stdout, line).not.toMatch(/"error":\s*"not_found"|No route for|"detail":\s*"Not Found"/);
    }
  }, 180_000);
});
