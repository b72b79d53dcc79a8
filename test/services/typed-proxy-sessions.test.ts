/**
 * Session isolation (issue 17): the typed proxy, started from configs/typed-proxy.yaml with its
 * stdio MCP reference server, runs one child per client session. Two official SDK clients get
 * different sessions and different children; neither can cancel the other's calls nor see the
 * resources the other stored; DELETE and idleness reap a child; the cap answers 503.
 */

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { openChain } from '../fixtures/audit-helpers.ts';
import { freePort, startEverythingHttp, stop, until } from '../helpers/servers.ts';

const config = join(import.meta.dirname, '../../configs/typed-proxy.yaml');
const MAX = 3;

interface Session {
  client: Client;
  transport: StreamableHTTPClientTransport;
  id: string;
}

const open: Session[] = [];

async function connect(url: string): Promise<Session> {
  const client = new Client({ name: 'sessions-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/`));
  await client.connect(transport);
  const session = { client, transport, id: transport.sessionId as string };
  open.push(session);
  return session;
}

/** Ends the session (DELETE) and the client. */
async function end(s: Session): Promise<void> {
  open.splice(open.indexOf(s), 1);
  await s.transport.terminateSession().catch(() => {});
  await s.client.close();
}

/** A raw JSON-RPC POST as an MCP client sends it after initialize. */
async function post(url: string, body: unknown, session?: string) {
  const res = await fetch(`${url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function upstreamDetail(svc: StartedService) {
  const status = (await (await fetch(`${svc.adminUrl}/admin/config`)).json()) as {
    upstreams: Array<{
      detail: { pid: number; session_pids: number[]; spare_pids: number[] };
      sessions: { live: number; max: number };
    }>;
  };
  return status.upstreams[0]!;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function metric(svc: StartedService, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => pattern.test(l));
  return line ? Number(line.split(' ').pop()) : 0;
}

const gzipData = (name: string) => ({
  name: 'gzip-file-as-resource',
  arguments: { name, data: 'data:text/plain;base64,aGVsbG8gd29ybGQ=', outputType: 'resourceLink' },
});

const auditDir = mkdtempSync(join(tmpdir(), 'sessions-audit-'));
afterAll(() => rmSync(auditDir, { recursive: true, force: true }));

describe('typed proxy, stdio upstream: one child per client session', () => {
  let svc: StartedService;
  const auditPath = join(auditDir, 'audit.db');
  beforeAll(async () => {
    svc = await startService(config, {
      warmupMs: 15000,
      env: { PROXY_AUDIT_PATH: auditPath },
      // One test client (one address) opens them all: its share is all of them here
      // (typed-proxy-session-owners.test.ts tests the share).
      set: [`upstreams.everything.max_sessions=${MAX}`, `upstreams.everything.max_sessions_per_client=${MAX}`],
    });
  });
  afterEach(async () => {
    for (const s of [...open]) await end(s);
  });
  afterAll(() => svc?.close());

  it('two SDK clients get different session ids and different children', async () => {
    const own = (await upstreamDetail(svc)).detail.pid;
    const a = await connect(svc.url);
    const b = await connect(svc.url);
    expect(a.id).toMatch(/^[\x21-\x7e]+$/); // visible ASCII, as the transport requires
    expect(b.id).not.toBe(a.id);
    const detail = await upstreamDetail(svc);
    expect(detail.sessions).toMatchObject({ live: 2, max: MAX });
    const pids = detail.detail.session_pids;
    expect(new Set(pids).size).toBe(2);
    expect(pids).not.toContain(own);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    // Each is a working MCP session.
    for (const s of [a, b]) {
      const result = await s.client.callTool({ name: 'echo', arguments: { message: s.id } });
      expect((result.content as Array<{ text: string }>)[0]?.text).toContain(s.id);
    }
    const health = await (await fetch(`${svc.url}/health`)).json();
    expect(health).toMatchObject({
      status: 'healthy',
      sessions: { mode: 'per-client', live: 2, max: MAX, max_per_client: MAX, clients: 1 },
    });
    expect(await metric(svc, /^switchyard_upstream_sessions\{.*upstream="everything"/)).toBe(2);
  });

  it("client B's guessed cancellations do not cancel client A's call", async () => {
    const a = await connect(svc.url);
    const b = await connect(svc.url);
    const dropped = /^switchyard_upstream_notifications_dropped_total\{.*method="notifications\/cancelled"/;
    const droppedBefore = await metric(svc, dropped);
    const call = a.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1.5, steps: 3 } });
    await new Promise((r) => setTimeout(r, 200)); // A's call is in flight
    // Every small id A's client may have used, as a number and as a string.
    const guesses = Array.from({ length: 30 }, (_, i) => [i, String(i)]).flat();
    for (const requestId of guesses) {
      const res = await post(
        svc.url,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } },
        b.id,
      );
      expect(res.status).toBe(202);
    }
    const result = await call;
    expect((result.content as Array<{ text: string }>)[0]?.text).toMatch(/Long running operation completed/);
    expect((await metric(svc, dropped)) - droppedBefore).toBe(guesses.length);
  });

  it('a resource stored in A’s session is neither listed nor readable in B’s', async () => {
    const a = await connect(svc.url);
    const b = await connect(svc.url);
    const stored = await a.client.callTool(gzipData('only-for-a.txt.gz'));
    const link = (stored.content as Array<{ type: string; uri: string }>)[0]!;
    expect(link).toMatchObject({ type: 'resource_link', uri: 'demo://resource/session/only-for-a.txt.gz' });
    const listA = await a.client.listResources();
    expect(listA.resources.map((r) => r.uri)).toContain(link.uri);
    const listB = await b.client.listResources();
    expect(listB.resources.map((r) => r.uri)).not.toContain(link.uri);
    await expect(b.client.readResource({ uri: link.uri })).rejects.toThrow(/not found|Resource/i);
    const readA = await a.client.readResource({ uri: link.uri });
    expect(readA.contents[0]?.uri).toBe(link.uri);
  });

  it('the audit trail records a refusal with the session id the proxy issued', async () => {
    const a = await connect(svc.url);
    await expect(a.client.callTool({ name: 'echo', arguments: { wrong: true } })).rejects.toThrow(/422|Schema/);
    const chain = await openChain({ backend: 'sqlite', path: auditPath });
    try {
      const { records } = await chain.value.query({ limit: 1000 });
      expect(records.some((r) => r.rule === 'schema-validation' && r.details.session === a.id)).toBe(true);
    } finally {
      await chain.close?.();
    }
  });

  it('DELETE ends the session and reaps its child; the id is then unknown (404)', async () => {
    const a = await connect(svc.url);
    const before = (await upstreamDetail(svc)).detail.session_pids;
    expect(before).toHaveLength(1);
    const pid = before[0]!;
    const del = await fetch(`${svc.url}/`, { method: 'DELETE', headers: { 'mcp-session-id': a.id } });
    expect(del.status).toBe(204);
    open.splice(open.indexOf(a), 1);
    await until(() => !alive(pid), 5000);
    expect((await upstreamDetail(svc)).sessions.live).toBe(0);
    const after = await post(svc.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, a.id);
    expect(after.status).toBe(404);
    expect(after.body.error).toMatchObject({ code: -32000, message: expect.stringMatching(/Unknown or expired/) });
    await a.client.close();
  });

  it('a session whose child dies is over: 404, and the gateway’s own child is untouched', async () => {
    const a = await connect(svc.url);
    const { detail } = await upstreamDetail(svc);
    const [pid] = detail.session_pids;
    process.kill(pid!, 'SIGKILL');
    await until(async () => (await upstreamDetail(svc)).sessions.live === 0, 5000);
    const res = await post(svc.url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, a.id);
    expect(res.status).toBe(404);
    expect((await upstreamDetail(svc)).detail.pid).toBe(detail.pid);
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
    open.splice(open.indexOf(a), 1);
    await a.client.close();
  });

  it('an MCP client without its session id gets 400, an unknown id 404 (JSON-RPC errors)', async () => {
    const missing = await post(svc.url, { jsonrpc: '2.0', id: 5, method: 'tools/list' });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ jsonrpc: '2.0', id: 5, error: { code: -32000 } });
    expect(missing.body.error.message).toMatch(/Mcp-Session-Id header required/);
    const unknown = await post(svc.url, { jsonrpc: '2.0', id: 6, method: 'tools/list' }, 'no-such-session');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ id: 6, error: { code: -32000 } });
  });

  it(`the ${MAX + 1}th live session gets a clear 503, counted`, async () => {
    const refused =
      /^switchyard_upstream_sessions_refused_total\{(?=.*upstream="everything")(?=.*reason="max_sessions")/;
    const before = await metric(svc, refused);
    for (let i = 0; i < MAX; i++) await connect(svc.url);
    const res = await post(svc.url, {
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'one-too-many', version: '1' } },
    });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ jsonrpc: '2.0', id: 'init', error: { code: -32000 } });
    expect(res.body.error.message).toMatch(/Too many MCP sessions: 3 of 3 .*max_sessions/);
    expect(res.body.error.data).toMatchObject({ upstream: 'everything', live: MAX, max_sessions: MAX });
    // The SDK client sees it too.
    await expect(connect(svc.url)).rejects.toThrow(/Too many MCP sessions/);
    expect((await metric(svc, refused)) - before).toBe(2);
    expect((await upstreamDetail(svc)).detail.session_pids).toHaveLength(MAX);
    // Ending one makes room.
    await end(open[0]!);
    await connect(svc.url);
  });

  it('plain JSON-RPC clients (no session, no MCP-Protocol-Version) still reach the gateway’s own server', async () => {
    const res = await fetch(`${svc.url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 9,
        method: 'tools/call',
        params: { name: 'echo', arguments: { message: 'seed' } },
      }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()).result.content[0].text).toContain('seed');
    expect((await upstreamDetail(svc)).sessions.live).toBe(0);
  });
});

describe('typed proxy, stdio upstream: idle sessions are reaped', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(config, {
      warmupMs: 15000,
      env: { PROXY_AUDIT_PATH: join(auditDir, 'audit-1.db') },
      set: [
        'upstreams.everything.max_sessions=2',
        'upstreams.everything.max_sessions_per_client=2',
        // Long enough for a loaded CI machine to get from one request to the next within it.
        'upstreams.everything.session_idle_timeout_ms=3000',
        'upstreams.everything.spare_sessions=1',
      ],
    });
  });
  afterAll(async () => {
    for (const s of [...open]) await end(s);
    await svc?.close();
  });

  it('spare_sessions: a session takes the child started ahead of it, and a new spare is started', async () => {
    await until(async () => (await upstreamDetail(svc)).detail.spare_pids.length === 1, 5000);
    const [spare] = (await upstreamDetail(svc)).detail.spare_pids;
    const a = await connect(svc.url);
    const { detail } = await upstreamDetail(svc);
    expect(detail.session_pids).toEqual([spare]);
    expect(detail.spare_pids).toHaveLength(1);
    expect(detail.spare_pids[0]).not.toBe(spare);
    await end(a);
    await until(() => !alive(spare!), 5000);
  });

  it('a session idle past session_idle_timeout_ms loses its child; one in use keeps it', async () => {
    const idle = await connect(svc.url);
    const busy = await connect(svc.url);
    // `busy` keeps calling; a long call in flight (longer than the idle timeout) counts as use too.
    const call = busy.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 6, steps: 2 } });
    const [pidIdle, pidBusy] = (await upstreamDetail(svc)).detail.session_pids;
    await until(() => !alive(pidIdle!), 8000);
    expect(alive(pidBusy!)).toBe(true);
    await call;
    const gone = await post(svc.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, idle.id);
    expect(gone.status).toBe(404);
    open.splice(open.indexOf(idle), 1);
    await idle.client.close();
  });
});

describe('typed proxy, stdio upstream, sessions: shared (stateless servers)', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(config, {
      warmupMs: 15000,
      env: { PROXY_AUDIT_PATH: join(auditDir, 'audit-2.db') },
      set: [
        'upstreams.everything.sessions=shared',
        'upstreams.everything.max_sessions=2',
        'upstreams.everything.max_sessions_per_client=2',
        'upstreams.everything.call_timeout_ms=4000',
      ],
    });
  });
  afterEach(async () => {
    for (const s of [...open]) await end(s);
  });
  afterAll(async () => {
    for (const s of [...open]) await end(s);
    await svc?.close();
  });

  it('one child for all; the same request ids from two clients get their own answers', async () => {
    const a = await connect(svc.url);
    const b = await connect(svc.url);
    expect(a.id).not.toBe(b.id);
    const detail = await upstreamDetail(svc);
    expect(detail.sessions).toMatchObject({ mode: 'shared', live: 2, max: 2 });
    expect(detail.detail.session_pids).toEqual([]);
    // Both SDK clients number their requests alike: concurrent calls carry the same ids.
    const [ra, rb] = await Promise.all(
      [a, b].map((s) =>
        Promise.all([1, 2, 3].map((n) => s.client.callTool({ name: 'echo', arguments: { message: `${s.id}-${n}` } }))),
      ),
    );
    for (const [s, results] of [
      [a, ra],
      [b, rb],
    ] as const) {
      const texts = results.map((r) => (r.content as Array<{ text: string }>)[0]?.text);
      expect(texts).toEqual([1, 2, 3].map((n) => `Echo: ${s.id}-${n}`));
    }
  });

  it("B's guessed cancellations are dropped, A's call completes; B's own cancellation still reaches the server", async () => {
    const a = await connect(svc.url);
    const b = await connect(svc.url);
    const longCall = { name: 'trigger-long-running-operation', arguments: { duration: 1.5, steps: 3 } };
    const call = a.client.callTool(longCall);
    // B's own long call, by raw POST with an id of its choosing.
    const own = post(svc.url, { jsonrpc: '2.0', id: 'mine', method: 'tools/call', params: longCall }, b.id);
    await new Promise((r) => setTimeout(r, 200));
    for (const requestId of Array.from({ length: 20 }, (_, i) => [i, String(i)]).flat()) {
      await post(svc.url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } }, b.id);
    }
    await post(svc.url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'mine' } }, b.id);
    const result = await call;
    expect((result.content as Array<{ text: string }>)[0]?.text).toMatch(/Long running operation completed/);
    // The server dropped B's cancelled call without an answer: the gateway times out (504), not 200.
    expect((await own).status).toBe(504);
  });
});

describe('typed proxy, streamable-HTTP upstream: each client session is its own upstream session', () => {
  let svc: StartedService;
  let upstream: ChildProcess;
  beforeAll(async () => {
    const port = await freePort();
    upstream = await startEverythingHttp(port);
    svc = await startService(config, {
      warmupMs: 15000,
      env: { PROXY_AUDIT_PATH: join(auditDir, 'audit-3.db') },
      set: [`upstreams.everything={kind: jsonrpc, url: "http://127.0.0.1:${port}/mcp", protocol: mcp}`],
    });
  });
  afterAll(async () => {
    for (const s of [...open]) await end(s);
    await svc?.close();
    if (upstream) await stop(upstream);
  });

  it('two concurrent SDK clients: different sessions, each sees only the resource it stored', async () => {
    const [a, b] = await Promise.all([connect(svc.url), connect(svc.url)]);
    expect(a.id).toBeTruthy();
    expect(b.id).toBeTruthy();
    expect(a.id).not.toBe(b.id);
    const [storedA, storedB] = await Promise.all([
      a.client.callTool(gzipData('a-http.txt.gz')),
      b.client.callTool(gzipData('b-http.txt.gz')),
    ]);
    const uriA = (storedA.content as Array<{ uri: string }>)[0]!.uri;
    const uriB = (storedB.content as Array<{ uri: string }>)[0]!.uri;
    const [listA, listB] = await Promise.all([a.client.listResources(), b.client.listResources()]);
    expect(listA.resources.map((r) => r.uri)).toContain(uriA);
    expect(listA.resources.map((r) => r.uri)).not.toContain(uriB);
    expect(listB.resources.map((r) => r.uri)).toContain(uriB);
    expect(listB.resources.map((r) => r.uri)).not.toContain(uriA);
    await expect(b.client.readResource({ uri: uriA })).rejects.toThrow(/not found|Resource/i);
    // A long call of A's completes while B sends guessed cancellations in its own session.
    const call = a.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } });
    await new Promise((r) => setTimeout(r, 150));
    for (const requestId of [0, 1, 2, 3, 4, 5, 6]) {
      await post(svc.url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } }, b.id);
    }
    expect(((await call).content as Array<{ text: string }>)[0]?.text).toMatch(/completed/);
  });
});

describe('typed proxy, stdio upstream: a reload that changes the upstream reaps the old sessions', () => {
  const root = join(import.meta.dirname, '../..');
  const dir = mkdtempSync(join(tmpdir(), 'sessions-reload-'));
  const file = join(dir, 'typed-proxy.yaml');
  let svc: StartedService;
  beforeAll(async () => {
    writeFileSync(file, readFileSync(config, 'utf8'));
    svc = await startService(file, {
      warmupMs: 15000,
      env: { PROXY_AUDIT_PATH: join(dir, 'audit.db') },
      set: [`upstreams.everything.cwd=${root}`, `resources.registry.dir=${join(root, 'configs/registry')}`],
    });
  });
  afterAll(async () => {
    for (const s of [...open]) await end(s);
    await svc?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('children of the old config are gone after the swap; their session ids answer 404', async () => {
    const a = await connect(svc.url);
    const [pid] = (await upstreamDetail(svc)).detail.session_pids;
    expect(alive(pid!)).toBe(true);
    // An unchanged upstream is reused (its sessions survive a reload)...
    expect((await svc.runtime.reload()).ok).toBe(true);
    expect(alive(pid!)).toBe(true);
    expect((await post(svc.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, a.id)).status).toBe(200);
    // ...a changed one replaces it, and the old one's children are reaped.
    const source = readFileSync(file, 'utf8');
    expect(source).toContain('session_idle_timeout_ms: 300000');
    writeFileSync(file, source.replace('session_idle_timeout_ms: 300000', 'session_idle_timeout_ms: 299000'));
    const outcome = await svc.runtime.reload();
    expect(outcome).toMatchObject({ ok: true, changed: true });
    await until(() => !alive(pid!), 5000);
    expect((await upstreamDetail(svc)).sessions).toMatchObject({ live: 0 });
    expect((await post(svc.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, a.id)).status).toBe(404);
    open.splice(open.indexOf(a), 1);
    await a.client.close();
    // A new session works on the new config.
    const b = await connect(svc.url);
    expect((await b.client.listTools()).tools.length).toBeGreaterThan(0);
  });
});
