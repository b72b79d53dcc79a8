/**
 * Who MCP sessions belong to (issue 29, items 2 and 6), through the typed proxy started from
 * configs/typed-proxy.yaml with its stdio MCP reference server:
 *
 * - one client holds at most its share of `max_sessions` (`max_sessions_per_client`, by default a
 *   quarter): sixteen initializes from one address do not lock out a second address;
 * - when every session is taken, a client under its share gets one: the longest-idle session (no
 *   call in flight) of the client holding the most is ended for it, never one of a client holding
 *   no more than the one asking;
 * - with OAuth on, a session is bound to the subject whose token opened it: Bob's valid token with
 *   Alice's `Mcp-Session-Id` is 404 on POST, GET and DELETE, and Alice's session lives on.
 *
 * Clients at different addresses are loopback aliases (127.0.0.2...: Linux routes the whole
 * 127/8 to lo), so the proxy sees them as the different hosts they stand for.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort, until } from '../helpers/servers.ts';

const config = 'configs/typed-proxy.yaml';

const agents: Agent[] = [];
afterAll(async () => {
  await Promise.all(agents.map((a) => a.close()));
});

/** A fetch whose connections come from `address`. */
function fetchFrom(address: string): typeof fetch {
  const dispatcher = new Agent({ localAddress: address });
  agents.push(dispatcher);
  return ((url: string | URL, init?: RequestInit) =>
    undiciFetch(url, { ...(init as object), dispatcher } as never)) as unknown as typeof fetch;
}

interface Answer {
  status: number;
  headers: Headers;
  body: { id?: unknown; result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } };
}

/** An MCP client speaking the streamable-HTTP transport by hand, from one address, with an optional token. */
class RawClient {
  constructor(
    private readonly url: string,
    private readonly fetcher: typeof fetch = fetch,
    private readonly token?: string,
  ) {}

  async send(method: 'POST' | 'GET' | 'DELETE', session?: string, body?: unknown): Promise<Answer> {
    const res = await this.fetcher(`${this.url}/`, {
      method,
      headers: {
        accept: method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(session ? { 'mcp-session-id': session } : {}),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
  }

  rpc(session: string, method: string, params?: unknown): Promise<Answer> {
    return this.send('POST', session, { jsonrpc: '2.0', id: `${method}-1`, method, ...(params ? { params } : {}) });
  }

  /** initialize, then notifications/initialized; the session id when it was opened. */
  async initialize(): Promise<Answer & { session?: string }> {
    const answer = await this.send('POST', undefined, {
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    const session = answer.headers.get('mcp-session-id') ?? undefined;
    if (session) {
      const ack = await this.send('POST', session, { jsonrpc: '2.0', method: 'notifications/initialized' });
      expect(ack.status).toBe(202);
    }
    return { ...answer, session };
  }

  end(session: string): Promise<Answer> {
    return this.send('DELETE', session);
  }
}

async function sessionsHealth(svc: StartedService) {
  const health = (await (await fetch(`${svc.url}/health`)).json()) as {
    sessions: { live: number; max: number; max_per_client: number; clients: number };
  };
  return health.sessions;
}

async function metric(svc: StartedService, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Every session the test opened, ended by its own client afterwards. */
const opened: Array<{ client: RawClient; session: string }> = [];
async function endAll(): Promise<void> {
  for (const { client, session } of opened.splice(0)) await client.end(session);
}

async function openAs(client: RawClient): Promise<string> {
  const answer = await client.initialize();
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  opened.push({ client, session: answer.session as string });
  return answer.session as string;
}

describe('without credentials: one address holds at most its share', () => {
  let svc: StartedService;
  beforeAll(async () => {
    // The shipped defaults: max_sessions 16, max_sessions_per_client unset (a quarter: 4).
    svc = await startService(config, { warmupMs: 15000 });
  });
  afterEach(endAll);
  afterAll(() => svc?.close());

  it('16 sessions opened by one client do not lock out a second', async () => {
    const perClient = () =>
      metric(svc, 'switchyard_upstream_sessions_refused_total', { upstream: 'everything', reason: 'per_client' });
    const before = await perClient();
    const attacker = new RawClient(svc.url, fetchFrom('127.0.0.1'));
    // All at once, as an attacker would: the share holds for concurrent initializes too.
    const attempts = await Promise.all(Array.from({ length: 16 }, () => attacker.initialize()));
    for (const a of attempts) if (a.session) opened.push({ client: attacker, session: a.session });
    expect(attempts.filter((a) => a.status === 200)).toHaveLength(4);
    const refused = attempts.filter((a) => a.status === 503);
    expect(refused).toHaveLength(12);
    for (const r of refused) {
      expect(r.headers.get('retry-after')).toBe('5');
      expect(r.body).toMatchObject({
        id: 'init',
        error: {
          code: -32000,
          data: { upstream: 'everything', client_sessions: 4, max_sessions_per_client: 4 },
        },
      });
      expect(r.body.error?.message).toMatch(/this client holds 4 of 4 \(max_sessions_per_client of upstream/);
    }
    expect((await perClient()) - before).toBe(12);

    // A second client, the official SDK client from another address: connected, and served.
    const client = new Client({ name: 'second', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/`), { fetch: fetchFrom('127.0.0.2') });
    await client.connect(transport);
    try {
      const result = await client.callTool({ name: 'echo', arguments: { message: 'not locked out' } });
      expect((result.content as Array<{ text: string }>)[0]?.text).toBe('Echo: not locked out');
      expect(await sessionsHealth(svc)).toEqual({
        mode: 'per-client',
        live: 5,
        max: 16,
        max_per_client: 4,
        clients: 2,
      });
    } finally {
      await transport.terminateSession();
      await client.close();
    }
    // The attacker's sessions are its own to keep using (none was ended for the second client).
    for (const { session } of opened) expect((await attacker.rpc(session, 'ping')).status).toBe(200);
  }, 60_000);
});

describe('when every session is taken: the longest-idle session of the client holding the most', () => {
  let svc: StartedService;
  const [a, b, c, d] = ['127.0.0.1', '127.0.0.2', '127.0.0.3', '127.0.0.4'];
  let clients: Record<string, RawClient>;
  beforeAll(async () => {
    svc = await startService(config, {
      warmupMs: 15000,
      set: ['upstreams.everything.max_sessions=4', 'upstreams.everything.max_sessions_per_client=2'],
    });
    clients = Object.fromEntries([a, b, c, d].map((ip) => [ip, new RawClient(svc.url, fetchFrom(ip))]));
  });
  afterEach(endAll);
  afterAll(() => svc?.close());

  const evictions = () => metric(svc, 'switchyard_upstream_sessions_evicted_total', { upstream: 'everything' });
  const tick = () => new Promise((r) => setTimeout(r, 20)); // distinct last-use times

  it('eviction picks the idle one: A holds two, its less recently used one is ended for D', async () => {
    const before = await evictions();
    const a1 = await openAs(clients[a]!);
    const a2 = await openAs(clients[a]!);
    const b1 = await openAs(clients[b]!);
    await tick();
    expect((await clients[a]!.rpc(a2, 'tools/list')).status).toBe(200); // a1 is now A's idlest
    const c1 = await openAs(clients[c]!);
    expect((await sessionsHealth(svc)).live).toBe(4);

    const d1 = await openAs(clients[d]!);
    expect((await evictions()) - before).toBe(1);
    const gone = await clients[a]!.rpc(a1, 'tools/list');
    expect(gone.status).toBe(404);
    expect(gone.body.error).toMatchObject({ code: -32000, message: expect.stringMatching(/Unknown or expired/) });
    opened.splice(
      opened.findIndex((o) => o.session === a1),
      1,
    );
    for (const [ip, s] of [
      [a, a2],
      [b, b1],
      [c, c1],
      [d, d1],
    ] as const) {
      expect((await clients[ip]!.rpc(s, 'tools/list')).status, ip).toBe(200);
    }
    expect(await sessionsHealth(svc)).toMatchObject({ live: 4, clients: 4 });
  }, 60_000);

  it('a session with a call in flight is not taken, even when it was used first', async () => {
    const a1 = await openAs(clients[a]!);
    const a2 = await openAs(clients[a]!);
    await openAs(clients[b]!);
    await openAs(clients[c]!);
    // a1 starts a long call, then a2 is used: a1 was used longest ago, but it is busy.
    let answered = false;
    const long = clients[a]!.rpc(a1, 'tools/call', {
      name: 'trigger-long-running-operation',
      arguments: { duration: 5, steps: 5 },
    });
    void long.then(() => {
      answered = true;
    });
    await tick();
    expect((await clients[a]!.rpc(a2, 'tools/list')).status).toBe(200);
    await openAs(clients[d]!);
    expect(answered).toBe(false); // a1's call was in flight when D opened its session
    expect((await clients[a]!.rpc(a2, 'tools/list')).status).toBe(404);
    opened.splice(
      opened.findIndex((o) => o.session === a2),
      1,
    );
    const answer = await long;
    expect(answer.status).toBe(200);
    expect(JSON.stringify(answer.body.result)).toMatch(/Long running operation completed/);
    expect((await clients[a]!.rpc(a1, 'tools/list')).status).toBe(200);
  }, 60_000);

  it('nobody holds more than the client asking: 503 max_sessions, and no session is ended', async () => {
    const held = await Promise.all([a, b, c, d].map((ip) => openAs(clients[ip]!)));
    const before = await evictions();
    const refusedBefore = await metric(svc, 'switchyard_upstream_sessions_refused_total', {
      upstream: 'everything',
      reason: 'max_sessions',
    });
    const res = await clients[a]!.initialize();
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body.error).toMatchObject({ code: -32000, data: { live: 4, max_sessions: 4 } });
    expect(res.body.error?.message).toMatch(/Too many MCP sessions: 4 of 4 \(max_sessions of upstream "everything"\)/);
    expect(await evictions()).toBe(before);
    expect(
      await metric(svc, 'switchyard_upstream_sessions_refused_total', {
        upstream: 'everything',
        reason: 'max_sessions',
      }),
    ).toBe(refusedBefore + 1);
    for (const [i, ip] of [a, b, c, d].entries()) {
      expect((await clients[ip]!.rpc(held[i]!, 'ping')).status).toBe(200);
    }
  }, 60_000);

  it('a client at its share is refused before anything is taken for it', async () => {
    await openAs(clients[a]!);
    await openAs(clients[a]!);
    const before = await evictions();
    const res = await clients[a]!.initialize();
    expect(res.status).toBe(503);
    expect(res.body.error?.message).toMatch(/holds 2 of 2 \(max_sessions_per_client/);
    expect(await evictions()).toBe(before);
    expect((await sessionsHealth(svc)).live).toBe(2);
  }, 60_000);
});

describe('with OAuth: a session belongs to the subject that opened it', () => {
  let as: OAuthServer;
  let svc: StartedService;
  let alice: RawClient;
  let bob: RawClient;
  let resource: string;
  const now = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    as = await startOAuthServer();
    const port = await freePort();
    resource = `http://127.0.0.1:${port}/`;
    svc = await startService(config, {
      warmupMs: 15000,
      set: [`listen.port=${port}`, 'upstreams.everything.max_sessions_per_client=2'],
      env: { PROXY_OAUTH: 'true', PROXY_OAUTH_RESOURCE: resource, PROXY_OAUTH_ISSUER: as.issuer },
    });
    const token = (sub: string) =>
      as.mint({ iss: as.issuer, sub, aud: resource, scope: 'mcp:tools mcp:tools:write', exp: now() + 600 });
    // Both from the same address: what tells them apart is the token alone.
    alice = new RawClient(svc.url, fetch, await token('alice'));
    bob = new RawClient(svc.url, fetch, await token('bob'));
  });
  afterEach(endAll);
  afterAll(async () => {
    await svc?.close();
    await as?.close();
  });

  it("Bob's token with Alice's session id: 404 on POST, GET and DELETE; Alice's session lives on", async () => {
    const session = await openAs(alice);
    const stored = await alice.rpc(session, 'tools/call', {
      name: 'gzip-file-as-resource',
      arguments: { name: 'alice.txt.gz', data: 'data:text/plain;base64,aGVsbG8=', outputType: 'resourceLink' },
    });
    expect(stored.status, JSON.stringify(stored.body)).toBe(200);
    const uri = 'demo://resource/session/alice.txt.gz';
    const listed = await alice.rpc(session, 'resources/list');
    expect(JSON.stringify(listed.body.result)).toContain(uri);

    const notFound = { code: -32000, message: expect.stringMatching(/Unknown or expired MCP session/) };
    const list = await bob.rpc(session, 'resources/list');
    expect(list.status).toBe(404);
    expect(list.body.error).toMatchObject(notFound);
    expect(JSON.stringify(list.body)).not.toContain(uri);
    const read = await bob.rpc(session, 'resources/read', { uri });
    expect(read.status).toBe(404);
    const call = await bob.rpc(session, 'tools/call', { name: 'echo', arguments: { message: 'in her session' } });
    expect(call.status).toBe(404);
    // The stream: there is none (405) for Alice; for Bob her session does not exist.
    expect((await alice.send('GET', session)).status).toBe(405);
    const stream = await bob.send('GET', session);
    expect(stream.status).toBe(404);
    expect(stream.body.error).toMatchObject(notFound);
    const del = await bob.end(session);
    expect(del.status).toBe(404);
    expect(del.body.error).toMatchObject(notFound);

    // Without a token: refused before any session is looked up.
    expect((await new RawClient(svc.url).rpc(session, 'resources/list')).status).toBe(401);

    // Alice's session is alive, her resource still hers.
    expect(await sessionsHealth(svc)).toMatchObject({ live: 1, clients: 1 });
    const again = await alice.rpc(session, 'resources/read', { uri });
    expect(again.status).toBe(200);
    expect(JSON.stringify(again.body.result)).toContain(uri);
    // And she can end it herself.
    opened.splice(0);
    expect((await alice.end(session)).status).toBe(204);
    expect((await alice.rpc(session, 'ping')).status).toBe(404);
  }, 60_000);

  it('shares are counted per subject: Alice at hers does not hold Bob back (same address)', async () => {
    await openAs(alice);
    await openAs(alice);
    const third = await alice.initialize();
    expect(third.status).toBe(503);
    expect(third.body.error?.message).toMatch(/holds 2 of 2 \(max_sessions_per_client/);
    const bobs = await openAs(bob);
    expect((await bob.rpc(bobs, 'ping')).status).toBe(200);
    await until(async () => (await sessionsHealth(svc)).clients === 2, 2000);
  }, 60_000);
});
