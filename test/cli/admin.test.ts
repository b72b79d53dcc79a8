import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { freePort } from '../helpers/servers.ts';

const root = join(import.meta.dirname, '../..');
const ops = join(root, 'test/fixtures/ops.yaml');
const run = promisify(execFile);

/** Runs the real command line; resolves to its exit status and output. */
async function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { SWITCHYARD_ADMIN_URL: _u, SWITCHYARD_ADMIN_TOKEN: _t, ...base } = process.env;
  try {
    const { stdout, stderr } = await run(process.execPath, [join(root, 'bin/switchyard.js'), 'admin', ...args], {
      env: { ...base, ...env },
      timeout: 20_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('switchyard admin', () => {
  let svc: StartedService;
  let auth: string[];

  beforeAll(async () => {
    svc = await startService(ops);
    auth = ['--url', svc.url, '--token', 'test-admin-token'];
  });
  afterAll(() => svc?.close());

  it('status: aligned key/value lines', async () => {
    const { code, stdout, stderr } = await cli(['status', ...auth]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines.map((l) => l.split(/\s{2,}/)[0])).toEqual([
      'version',
      'uptime',
      'connections',
      'memory',
      'heap',
      'cpu',
    ]);
    // Values start in one column.
    expect(new Set(lines.map((l) => l.search(/(?<=\s{2})\S/))).size).toBe(1);
    expect(stdout).toMatch(/^version\s+2\.3\.4$/m);
    expect(stdout).toMatch(/^connections\s+\d+ \/ 16$/m);
    expect(stdout).toMatch(/^memory\s+\d+\.\d MiB resident$/m);
    expect(stdout).toMatch(/^cpu\s+\d+\.\d% \(user \d+\.\d\d s, system \d+\.\d\d s\)$/m);
  });

  it('--json prints the endpoint answer; the URL and token may come from the environment', async () => {
    const { code, stdout } = await cli(['status', '--json'], {
      SWITCHYARD_ADMIN_URL: svc.url,
      SWITCHYARD_ADMIN_TOKEN: 'test-admin-token',
    });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ version: '2.3.4', connections: { max: 16 } });
  });

  it('stats --queries: totals, latency percentiles in ms, top entities', async () => {
    const { code, stdout } = await cli(['stats', '--queries', ...auth]);
    expect(code).toBe(0);
    expect(stdout).toBe(
      [
        'window   last 1h 00m 00s',
        'queries  1234',
        'errors   5 (0.4%)',
        'avg      2.50 ms',
        'p50      1.20 ms',
        'p95      8.75 ms',
        'p99      31.40 ms',
        '',
        'ENTITY  QUERIES  SHARE',
        'user        800  64.8%',
        'order       434  35.2%',
        '',
      ].join('\n'),
    );
  });

  it('stats --storage: human sizes and the cache hit percentage', async () => {
    const { code, stdout } = await cli(['stats', '--storage', ...auth]);
    expect(code).toBe(0);
    expect(stdout).toBe(
      [
        'data       12.3 MiB',
        'index      2.0 MiB',
        'wal        0 B',
        'free       50.0 GiB',
        'cache hit  95.0% (950 hits, 50 misses)',
        '',
      ].join('\n'),
    );
  });

  it('slow-queries --limit N: a table of shapes', async () => {
    const { code, stdout } = await cli(['slow-queries', '--limit', '2', ...auth]);
    expect(code).toBe(0);
    expect(stdout).toBe(
      [
        'queries slower than 100 ms',
        '',
        'SHAPE                                            ENTITY  COUNT        AVG        MAX  LAST',
        'find user where email = ?                        user       12  180.50 ms  912.25 ms  2026-01-02T03:04:05.000Z',
        'list order where status = ? order by created_at  order       3  120.00 ms  150.00 ms  2026-01-02T03:00:00.000Z',
        '',
      ].join('\n'),
    );
  });

  it('connections: one row per client connection', async () => {
    const { code, stdout } = await cli(['connections', ...auth]);
    expect(code).toBe(0);
    const [head, blank, columns, ...rows] = stdout.trimEnd().split('\n');
    expect(head).toMatch(/^\d+ \/ 16 connections$/);
    expect(blank).toBe('');
    expect(columns?.split(/\s{2,}/)).toEqual(['CLIENT', 'CONNECTED', 'REQUESTS', 'IN FLIGHT', 'DURATION']);
    // The CLI's own connection is listed, its request in flight.
    expect(rows.some((r) => /^127\.0\.0\.1:\d+\s+\S+Z\s+1\s+1\s+\d+ ms$/.test(r))).toBe(true);
  });

  it('a wrong or missing token: one line on stderr, exit 2', async () => {
    const wrong = await cli(['status', '--url', svc.url, '--token', 'nope']);
    expect(wrong.code).toBe(2);
    expect(wrong.stdout).toBe('');
    expect(wrong.stderr).toBe(
      'switchyard admin: 401 Invalid token (give the admin token with --token or SWITCHYARD_ADMIN_TOKEN)\n',
    );
    const missing = await cli(['status', '--url', svc.url]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^switchyard admin: 401 Missing token in header X-Admin-Token \(or Authorization: Bearer\) \(give/,
    );
    expect(missing.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('no such endpoint: 404 on one line, exit 2', async () => {
    const { code, stderr } = await cli(['status', '--url', `${svc.url}/elsewhere`, '--token', 'test-admin-token']);
    expect(code).toBe(2);
    expect(stderr).toBe(
      `switchyard admin: 404 No route for GET /elsewhere/admin/status (no ops-api endpoint /elsewhere/admin/status at ${svc.url}?)\n`,
    );
  });

  it('nothing listening: connection refused on one line, exit 1', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const { code, stdout, stderr } = await cli(['status', '--url', url]);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      `switchyard admin: cannot reach ${url}: connection refused (is the service running? check --url)\n`,
    );
  });

  it('bad usage: exit 2 with the usage', async () => {
    for (const args of [
      ['stats'],
      ['stats', '--queries', '--storage'],
      ['slow-queries', '--limit', 'x'],
      ['frob'],
      [],
    ]) {
      const { code, stderr } = await cli(args);
      expect(code, args.join(' ')).toBe(2);
      expect(stderr).toMatch(/^switchyard admin: .+\nusage:/);
    }
  });
});
