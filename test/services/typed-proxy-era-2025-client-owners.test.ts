/**
 * Issue 30, per-client isolation in the reverse direction with OAuth on: a 2025-11-25 client's
 * session that the gateway holds in front of a 2026-07-28-only upstream (plugins/proxy/
 * era-2025-client.ts) belongs to the OAuth subject that opened it. Through the typed proxy
 * (configs/typed-proxy.yaml, PROXY_OAUTH=true, a real token issuer on loopback): Bob's valid token
 * with Alice's session id is 404 on POST, GET and DELETE and the upstream is never asked; Alice's
 * session serves on; what goes upstream for each caller carries that caller's own clientInfo and
 * capabilities, never the other's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type ModernServer, modern, startModernOnlyServer } from '../helpers/mcp-2026-server.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort } from '../helpers/servers.ts';

const meta = 'io.modelcontextprotocol/';
let as: OAuthServer;
let upstream: ModernServer;
let svc: StartedService;
let alice: string;
let bob: string;

beforeAll(async () => {
  as = await startOAuthServer();
  upstream = await startModernOnlyServer();
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/`;
  svc = await startService('configs/typed-proxy.yaml', {
    warmupMs: 15000,
    set: [`listen.port=${port}`, `upstreams.everything={kind: jsonrpc, url: "${upstream.url}", protocol: mcp}`],
    env: { PROXY_OAUTH: 'true', PROXY_OAUTH_RESOURCE: resource, PROXY_OAUTH_ISSUER: as.issuer },
  });
  const exp = Math.floor(Date.now() / 1000) + 600;
  const token = (sub: string) => as.mint({ iss: as.issuer, sub, aud: resource, scope: 'mcp:tools', exp });
  alice = await token('alice');
  bob = await token('bob');
}, 90_000);

afterAll(async () => {
  await svc?.close();
  await upstream?.close();
  await as?.close();
});

function field(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
}

interface Sent {
  status: number;
  session: string | null;
  body?: { result?: Record<string, unknown>; error?: { code: number } };
}

async function send(token: string, method: 'POST' | 'GET' | 'DELETE', session?: string, body?: unknown): Promise<Sent> {
  const res = await fetch(`${svc.url}/`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      accept: method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  // A GET stream that opened stays open: only its status matters here.
  if (method === 'GET' && res.status === 200) {
    await res.body?.cancel();
    return { status: res.status, session: null };
  }
  const text = await res.text();
  return {
    status: res.status,
    session: res.headers.get('mcp-session-id'),
    body: text.startsWith('{') ? (JSON.parse(text) as Sent['body']) : undefined,
  };
}

async function open(token: string, name: string, capabilities: Record<string, unknown>): Promise<string> {
  const res = await send(token, 'POST', undefined, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name, version: '1' } },
  });
  expect(res.status).toBe(200);
  expect(res.body?.result?.protocolVersion).toBe('2025-11-25');
  return res.session as string;
}

const echo = (token: string, session: string, message: string) =>
  send(token, 'POST', session, {
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/call',
    params: { name: 'echo', arguments: { message } },
  });

describe('a gateway-held 2025 session in front of a 2026-only upstream belongs to its OAuth subject', () => {
  it("Bob's token with Alice's session id: 404 on POST, GET and DELETE, the upstream never asked; Alice serves on", async () => {
    const session = await open(alice, 'alice-client', { roots: {} });
    const seen = upstream.received.length;
    for (const method of ['POST', 'GET', 'DELETE'] as const) {
      const res = await send(
        bob,
        method,
        session,
        method === 'POST'
          ? { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { message: 'x' } } }
          : undefined,
      );
      expect({ method, status: res.status }).toEqual({ method, status: 404 });
    }
    expect(upstream.received.length).toBe(seen);
    const still = await echo(alice, session, 'mine');
    expect(still.status).toBe(200);
    expect(still.body?.result).toMatchObject({ content: [{ type: 'text', text: 'Echo: mine' }] });
  });

  it('each caller’s requests go upstream with its own clientInfo and capabilities', async () => {
    const a = await open(alice, 'alice-client', { roots: {} });
    const b = await open(bob, 'bob-client', { elicitation: {} });
    expect(a).not.toBe(b);
    for (const [token, session, name, caps] of [
      [alice, a, 'alice-client', { roots: {} }],
      [bob, b, 'bob-client', { elicitation: {} }],
    ] as const) {
      const res = await echo(token, session, name);
      expect(res.body?.result).toMatchObject({ content: [{ type: 'text', text: `Echo: ${name}` }] });
      const call = upstream.received.filter((r) => r.method === 'tools/call').at(-1);
      const m = field(call?.body.params, '_meta') as Record<string, unknown>;
      expect(m[`${meta}protocolVersion`]).toBe(modern);
      expect(m[`${meta}clientInfo`]).toEqual({ name, version: '1' });
      expect(m[`${meta}clientCapabilities`]).toEqual(caps);
    }
  });

  it('a request without a token is refused before any session is looked up', async () => {
    const session = await open(alice, 'alice-client', {});
    const seen = upstream.received.length;
    const res = await fetch(`${svc.url}/`, {
      method: 'POST',
      headers: {
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-protocol-version': '2025-11-25',
        'mcp-session-id': session,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect(upstream.received.length).toBe(seen);
  });
});
