/**
 * Starting a stack: an absent upstream costs one refused connection, not the warm-up timeout; the
 * services of one command start together; the banner says where each answers and what it lacks.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { ServiceRuntime } from '../../runtime/service/runtime.ts';
import { freePort } from '../helpers/servers.ts';

const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'sy-start-'));

function serviceWithUpstream(name: string, url: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `service: ${name}
listen: { port: 0 }
upstreams:
  backend: { kind: http, url: "${url}" }
routes:
  - match: { path: /x }
    pipeline: [{ proxy: { upstream: backend } }]
`,
  );
  return file;
}

describe('start', () => {
  it('does not wait out the warm-up for an upstream that refuses: it is reported and probed', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    // With a minute of warm-up allowed, returning at all proves the start did not wait for it.
    const runtime = await ServiceRuntime.start(serviceWithUpstream('absent', closed), {
      set: [],
      logger: silentLogger,
      warmupMs: 60_000,
    });
    try {
      const health = await runtime.health();
      expect(health.ok).toBe(false);
      expect(health.checks['upstream:backend']).toMatchObject({ ok: false });
      expect(String(health.checks['upstream:backend']?.error)).toMatch(/refused/);
    } finally {
      await runtime.close();
    }
  }, 20_000);

  it('serve starts every service and prints a banner with each URL and state', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const files = ['one', 'two', 'three'].map((n) => serviceWithUpstream(n, closed));
    const child = spawn(process.execPath, [join(root, 'bin/switchyard.js'), 'serve', ...files], {
      env: { ...process.env, SWITCHYARD_RUN_DIR: join(dir, 'run'), LOG_LEVEL: 'error' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (d) => {
      stderr += d;
    });
    try {
      await new Promise<void>((resolve, reject) => {
        const poll = setInterval(() => {
          if (/^three: /m.test(stderr)) {
            clearInterval(poll);
            resolve();
          } else if (child.exitCode !== null) {
            clearInterval(poll);
            reject(new Error(stderr));
          }
        }, 50);
      });
      expect(stderr).toMatch(/^switchyard \d+\.\d+\.\d+: 3 services up in \d+\.\d s$/m);
      for (const name of ['one', 'two', 'three']) {
        expect(stderr).toMatch(
          new RegExp(
            `^${name}: http://127\\.0\\.0\\.1:\\d+  degraded: upstream:backend \\(connection refused\\)$`,
            'm',
          ),
        );
      }
    } finally {
      child.kill('SIGTERM');
    }
  }, 30_000);
});
