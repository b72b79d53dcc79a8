/**
 * MCP sessions that an HTTP upstream issues are bound to the subject that opened them (issue 29,
 * item 6, for `jsonrpc` upstreams; plugins/proxy/session-binding.ts), as the gateway's own stdio
 * sessions are: through the typed proxy (configs/typed-proxy.yaml, OAuth on) in front of an MCP
 * server over streamable HTTP (the official SDK's transport), Bob's valid token with Alice's
 * session id reaches nothing — 404 on POST, GET and DELETE, the upstream never asked — and
 * Alice's session lives on. The upstream's own id, or a bound id with its MAC changed, is not a
 * session either.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type McpEndpoint, mcpEndpoint } from '../helpers/mcp-endpoint.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort } from '../helpers/servers.ts';

let as: OAuthServer;
let svc: StartedService;
let endpoint: McpEndpoint;
let alice: string;
let bob: string;

beforeAll(async () => {
  as = await startOAuthServer();
  endpoint = await mcpEndpoint('e1');
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/`;
  svc = await startService('configs/typed-proxy.yaml', {
    set: [`listen.port=${port}`, `upstreams.everything={kind: jsonrpc, url: "${endpoint.url}"}`],
    env: { PROXY_OAUTH: 'true', PROXY_OAUTH_RESOURCE: resource, PROXY_OAUTH_ISSUER: as.issuer },
  });
  const exp = Math.floor(Date.now() / 1000) + 600;
  const token = (sub: string) => as.mint({ iss: as.issuer, sub, aud: resource, scope: 'mcp:tools', exp });
  alice = await token('alice');
  bob = await token('bob');
}, 90_000);

afterAll(async () => {
  await svc?.close();
  endpoint?.close();
  await as?.close();
});

async function send(
  token: string,
  method: 'POST' | 'GET' | 'DELETE',
  session?: string,
  body?: unknown,
): Promise<{ status: number; session: string | null; text: string }> {
  const res = await fetch(`${svc.url}/`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      accept: method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  // A GET stream that opened stays open: only its status matters here.
  const stream = method === 'GET' && res.status === 200;
  const text = stream ? '' : await res.text();
  if (stream) await res.body?.cancel();
  return { status: res.status, session: res.headers.get('mcp-session-id'), text };
}

async function open(token: string): Promise<string> {
  const res = await send(token, 'POST', undefined, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'owners', version: '1' } },
  });
  expect(res.status).toBe(200);
  const session = res.session as string;
  expect((await send(token, 'POST', session, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(
    202,
  );
  return session;
}

const ping = (token: string, session: string) =>
  send(token, 'POST', session, { jsonrpc: '2.0', id: 2, method: 'ping' });

describe('sessions of an HTTP MCP upstream belong to the subject that opened them', () => {
  it("Bob's token with Alice's session id: 404 on POST, GET and DELETE, the upstream never asked; Alice's session lives on", async () => {
    const session = await open(alice);
    const upstreamId = session.slice(0, -17);
    expect(endpoint.sessions.has(upstreamId)).toBe(true);
    const hits = endpoint.hits;
    for (const method of ['POST', 'GET', 'DELETE'] as const) {
      const res = await send(
        bob,
        method,
        session,
        method === 'POST' ? { jsonrpc: '2.0', id: 3, method: 'ping' } : undefined,
      );
      expect({ method, status: res.status }).toEqual({ method, status: 404 });
    }
    expect(endpoint.hits).toBe(hits);
    expect(endpoint.sessions.has(upstreamId)).toBe(true);
    const still = await ping(alice, session);
    expect(still.status).toBe(200);
    expect(still.text).toContain('"result":{}');
  });

  it("neither the upstream's own id nor a bound id with another MAC is a session", async () => {
    const session = await open(alice);
    const upstreamId = session.slice(0, -17);
    const hits = endpoint.hits;
    expect((await ping(alice, upstreamId)).status).toBe(404);
    const mac = session.slice(-16);
    const forged = `${upstreamId}.${mac[0] === '0' ? '1' : '0'}${mac.slice(1)}`;
    expect((await ping(alice, forged)).status).toBe(404);
    expect(endpoint.hits).toBe(hits);
  });

  it('Alice ends her own session', async () => {
    const session = await open(alice);
    const upstreamId = session.slice(0, -17);
    const res = await send(alice, 'DELETE', session);
    expect(res.status).toBeLessThan(300);
    expect(endpoint.sessions.has(upstreamId)).toBe(false);
  });
});
