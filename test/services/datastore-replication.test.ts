/**
 * Replication between two real datastore processes (configs/datastore.toml): the replica follows
 * the primary's change log, serves reads, refuses writes, reports its lag, and after being
 * killed and restarted catches up with nothing lost or applied twice.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, until } from '../helpers/servers.ts';
import { untilReady } from '../helpers/service-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'sy-datastore-repl-'));
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

interface Node {
  child: ChildProcess;
  url: string;
  metrics: string;
}

async function startNode(name: string, env: Record<string, string>): Promise<Node> {
  // Port 0, found from the ready banner (test/helpers/service-process.ts `untilReady`: why not a free port).
  const child = spawn(process.execPath, ['bin/switchyard.js', 'serve', 'configs/datastore.toml'], {
    env: {
      ...process.env,
      DB_SERVER_PORT: '0',
      DB_METRICS_PORT: '0',
      DB_STORAGE_PATH: join(dir, `${name}.db`),
      DB_LOGGING_LEVEL: 'warn',
      DB_REPLICATION_TOKEN: 'repl-secret',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  children.push(child);
  const { url, metricsPort } = await untilReady(child, {
    probe: async (ready) => (await get(`${ready}/health`).catch(() => ({ status: 0 }))).status === 200,
    timeoutMs: 30_000,
    exited: () => `${name} exited: ${stderr}`,
  });
  return { child, url, metrics: `http://127.0.0.1:${metricsPort}/metrics` };
}

// biome-ignore lint/suspicious/noExplicitAny: JSON answers read by shape in the assertions
type Json = any;

async function get(url: string): Promise<{ status: number; body: Json }> {
  const res = await request(url);
  const text = await res.body.text();
  return { status: res.statusCode, body: text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : text };
}

async function post(url: string, body: unknown): Promise<{ status: number; body: Json }> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

async function all(node: Node): Promise<Array<{ id: number; version: number; data: unknown }>> {
  const { body } = await get(`${node.url}/v1/entities/note?limit=100&order=id`);
  return (body.items as Array<{ id: number; version: number; data: unknown }>).map((e) => ({
    id: e.id,
    version: e.version,
    data: e.data,
  }));
}

async function lagChanges(node: Node): Promise<number> {
  const text = (await get(node.metrics)).body as string;
  // Sampled once a second by the replica; NaN until the series exists.
  const m = /^db_replication_lag_changes(?:\{[^}]*\})? (\S+)$/m.exec(text);
  return Number(m?.[1] ?? Number.NaN);
}

describe('datastore replication (two processes)', () => {
  it('follows, refuses writes on the replica, and resumes after a kill without loss or repeats', async () => {
    const bind = `127.0.0.1:${await freePort()}`;
    const primary = await startNode('primary', { DB_REPLICATION_ROLE: 'primary', DB_REPLICATION_BIND: bind });
    for (let i = 0; i < 30; i++) expect((await post(`${primary.url}/v1/entities/note`, { i })).status).toBe(201);

    const replicaEnv = { DB_REPLICATION_ROLE: 'replica', DB_REPLICATION_PRIMARY: bind };
    let replica = await startNode('replica', replicaEnv);
    await until(async () => (await all(replica)).length === 30, 20_000);
    expect(await all(replica)).toEqual(await all(primary));

    // Writes on the replica are refused, clearly, and change nothing.
    const refused = await post(`${replica.url}/v1/entities/note`, { i: -1 });
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toMatch(/read-only replica/);
    await until(async () => (await lagChanges(replica)) === 0, 10_000);

    // Killed mid-stream: the primary goes on writing (creates, updates, deletes).
    replica.child.kill('SIGKILL');
    await new Promise((r) => replica.child.once('exit', r));
    const before = await all(primary);
    for (const e of before.slice(0, 10)) {
      const res = await request(`${primary.url}/v1/entities/note/${e.id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', 'if-match': `"${e.version}"` },
        body: JSON.stringify({ edited: true }),
      });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    }
    for (const e of before.slice(10, 15)) {
      const res = await request(`${primary.url}/v1/entities/note/${e.id}`, { method: 'DELETE' });
      expect(res.statusCode).toBe(204);
      await res.body.dump();
    }
    for (let i = 0; i < 25; i++) await post(`${primary.url}/v1/entities/note`, { i: 100 + i });

    replica = await startNode('replica', replicaEnv);
    const expected = await all(primary);
    await until(async () => JSON.stringify(await all(replica)) === JSON.stringify(expected), 20_000);
    expect(await all(replica)).toEqual(expected);
    // Versions equal the primary's: an update applied twice would have bumped them.
    expect(expected.filter((e) => e.version === 2)).toHaveLength(10);
    await until(async () => (await lagChanges(replica)) === 0, 10_000);
  }, 90_000);
});

describe('the change feed is never more open than the API', () => {
  // A primary that cannot start exits with the reason on stderr.
  async function refusal(env: Record<string, string>): Promise<string> {
    const child = spawn(process.execPath, ['bin/switchyard.js', 'serve', 'configs/datastore.toml'], {
      env: {
        ...process.env,
        DB_SERVER_PORT: '0',
        DB_METRICS_ENABLED: 'false',
        DB_STORAGE_PATH: join(dir, `refused-${children.length}.db`),
        DB_REPLICATION_ROLE: 'primary',
        DB_REPLICATION_BIND: `127.0.0.1:${await freePort()}`,
        DB_REPLICATION_TOKEN: '',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).not.toBe(0);
    return out;
  }

  it('with API auth on and no DB_REPLICATION_TOKEN, the primary refuses to start', async () => {
    const out = await refusal({ DB_AUTH_ENABLED: 'true', DB_AUTH_TOKEN: 'api-secret', DB_ADMIN_TOKEN: 'a' });
    expect(out).toMatch(/DB_REPLICATION_TOKEN.*the API requires authentication/);
  }, 30_000);

  it('on a bind beyond loopback without DB_REPLICATION_TOKEN, the primary refuses to start', async () => {
    const out = await refusal({ DB_REPLICATION_BIND: `0.0.0.0:${await freePort()}` });
    expect(out).toMatch(/DB_REPLICATION_TOKEN.*beyond loopback/);
  }, 30_000);

  it('with a token, the feed refuses a request without it', async () => {
    const feedPort = await freePort();
    await startNode('authed-primary', {
      DB_REPLICATION_ROLE: 'primary',
      DB_REPLICATION_BIND: `127.0.0.1:${feedPort}`,
      DB_AUTH_ENABLED: 'true',
      DB_AUTH_TOKEN: 'api-secret',
      DB_ADMIN_TOKEN: 'a',
    });
    expect((await get(`http://127.0.0.1:${feedPort}/v1/changes?after=0`)).status).toBe(401);
  }, 40_000);
});
