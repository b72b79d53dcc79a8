/**
 * The typed proxy as an OAuth 2.1 protected resource (MCP authorization, 2025-11-25), with
 * PROXY_OAUTH=true: the official SDK client discovers the metadata from the 401, gets a token
 * from a fixture authorization server that signs real JWTs (client_credentials, RFC 8707
 * resource indicator) and calls a tool; tokens a real server would not accept for this resource
 * are refused with the challenge RFC 6750 and RFC 9728 describe; the token never reaches the
 * upstream.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort } from '../helpers/servers.ts';

let as: OAuthServer;
let svc: StartedService;
let upstream: Server;
let resource: string;
const upstreamHeaders: IncomingHttpHeaders[] = [];

/** A minimal JSON-RPC upstream speaking enough MCP for the SDK client; it records the headers it gets. */
function startUpstream(): Promise<string> {
  upstream = createServer((req, res) => {
    upstreamHeaders.push(req.headers);
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const msg = JSON.parse(body) as { id?: unknown; method: string; params?: { protocolVersion?: string } };
      if (msg.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const result =
        msg.method === 'initialize'
          ? {
              protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
              capabilities: { tools: {} },
              serverInfo: { name: 'fixture', version: '0.0.0' },
            }
          : msg.method === 'tools/list'
            ? { tools: [{ name: 'clock', description: 'Returns the time.', inputSchema: { type: 'object' } }] }
            : { content: [{ type: 'text', text: '10:42' }] };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    });
  });
  return new Promise((r) =>
    upstream.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`)),
  );
}

beforeAll(async () => {
  as = await startOAuthServer();
  const upstreamUrl = await startUpstream();
  const port = await freePort();
  resource = `http://127.0.0.1:${port}/`;
  svc = await startService('configs/typed-proxy.yaml', {
    set: [`listen.port=${port}`, `upstreams.everything={kind: jsonrpc, url: "${upstreamUrl}"}`],
    env: { PROXY_OAUTH: 'true', PROXY_OAUTH_RESOURCE: resource, PROXY_OAUTH_ISSUER: as.issuer },
  });
});

afterAll(async () => {
  await svc?.close();
  await new Promise<void>((r) => upstream?.close(() => r()));
  await as?.close();
});

const call = (token?: string) =>
  fetch(`${svc.url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });

const metadataUrl = () => `${resource}.well-known/oauth-protected-resource`;

describe('discovery', () => {
  it('serves the protected resource metadata (RFC 9728)', async () => {
    const res = await fetch(metadataUrl());
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      resource,
      authorization_servers: [as.issuer],
      scopes_supported: ['mcp:tools'],
      bearer_methods_supported: ['header'],
    });
  });

  it('a request without a token is 401 with the metadata URL and the scope in WWW-Authenticate', async () => {
    const res = await call();
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrl()}", scope="mcp:tools"`);
  });
});

describe('the official SDK client', () => {
  it('discovers the issuer, obtains a token for this resource, lists and calls tools; the token stays here', async () => {
    const provider = new ClientCredentialsProvider({
      clientId: as.clientId,
      clientSecret: as.clientSecret,
      scope: 'mcp:tools',
      expectedIssuer: as.issuer,
    });
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }));
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(['clock']);
      const result = await client.callTool({ name: 'clock', arguments: {} });
      expect((result.content as Array<{ text: string }>)[0].text).toBe('10:42');
    } finally {
      await client.close();
    }
    expect(as.issued.length).toBeGreaterThan(0);
    expect(upstreamHeaders.length).toBeGreaterThan(0);
    for (const h of upstreamHeaders) expect(h.authorization).toBeUndefined();
  });
});

describe('tokens that are refused', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const good = () => ({ iss: as.issuer, sub: 'client:x', aud: resource, scope: 'mcp:tools', exp: now() + 300 });
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

  it('a valid token is accepted (the baseline of the cases below)', async () => {
    expect((await call(await as.mint(good()))).status).toBe(200);
  });

  it.each([
    ['another audience', async () => as.mint({ ...good(), aud: 'http://127.0.0.1:1/' })],
    ['expired', async () => as.mint({ ...good(), exp: now() - 3600 })],
    ['another issuer', async () => as.mint({ ...good(), iss: 'http://evil.example' })],
    ['signed with another key', async () => as.mint(good(), { key: 'other' })],
    ['no expiry', async () => as.mint({ ...good(), exp: undefined })],
    ['alg none (unsigned)', async () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64(good())}.`],
    ['not a JWT', async () => 'abc.def.ghi'],
  ])('%s: 401 invalid_token', async (_name, make) => {
    const res = await call(await make());
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toContain(`resource_metadata="${metadataUrl()}"`);
    expect(challenge).toContain('error="invalid_token"');
  });

  it('a token without the required scope: 403 insufficient_scope', async () => {
    const res = await call(await as.mint({ ...good(), scope: 'other:scope' }));
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
  });

  it('the health check needs no token', async () => {
    expect((await fetch(`${svc.url}/health`)).status).not.toBe(401);
  });
});
