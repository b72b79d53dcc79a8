/**
 * A tool allowed only with a scope (configs/registry/policies/tool-scopes.yaml): with the OAuth
 * resource server on, the reference server's state-changing tools (toggle-simulated-logging…) need
 * `mcp:tools:write`. Without it the call is answered as the MCP authorization specification
 * (2025-11-25, "insufficient scope") says: 403 with `WWW-Authenticate: Bearer
 * error="insufficient_scope", scope="…"` naming every scope the request needs, the body being the
 * policy's JSON-RPC error (`required_scopes` in its data); the official SDK client reads the
 * challenge and tries for a new token before it gives up. A client whose token has the scope lists
 * and calls the tool; one whose token lacks it does not see the tool listed and is refused. Through
 * the real typed proxy (configs/typed-proxy.yaml) in front of @modelcontextprotocol/server-everything
 * (stdio), tokens from a fixture authorization server that grants each client its own scopes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort } from '../helpers/servers.ts';

const WRITE_TOOL = 'toggle-simulated-logging';

let as: OAuthServer;
let svc: StartedService;
let resource: string;

beforeAll(async () => {
  as = await startOAuthServer({
    clients: {
      reader: { secret: 'reader-secret', scopes: ['mcp:tools'] },
      writer: { secret: 'writer-secret', scopes: ['mcp:tools', 'mcp:tools:write'] },
    },
  });
  const port = await freePort();
  resource = `http://127.0.0.1:${port}/`;
  svc = await startService('configs/typed-proxy.yaml', {
    set: [`listen.port=${port}`],
    env: {
      PROXY_OAUTH: 'true',
      PROXY_OAUTH_RESOURCE: resource,
      PROXY_OAUTH_ISSUER: as.issuer,
      PROXY_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'typed-proxy-scopes-')), 'audit.db'),
    },
  });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await as?.close();
});

const now = () => Math.floor(Date.now() / 1000);
const token = (scope: string) => as.mint({ iss: as.issuer, sub: 'client:x', aud: resource, scope, exp: now() + 300 });

async function callTool(bearer: string, name: string) {
  const res = await fetch(`${svc.url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${bearer}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 41, method: 'tools/call', params: { name, arguments: {} } }),
  });
  return { res, body: await res.json() };
}

/**
 * An SDK client of the given registered client (client_credentials), asking for `scope`. The SDK
 * (1.32) requests its configured scope on every token request of this grant, the challenge's
 * included: step-up to the challenge's scope happens in the authorization-code flow only.
 */
async function connect(clientId: string, secret: string, scope: string): Promise<Client> {
  const provider = new ClientCredentialsProvider({ clientId, clientSecret: secret, scope, expectedIssuer: as.issuer });
  const client = new Client({ name: `scopes-${clientId}`, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }));
  return client;
}

const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());
const scopesOf = (jwt: string) => String(claimsOf(jwt).scope ?? '').split(' ');

describe('a token without the scope', () => {
  it('is answered 403 insufficient_scope naming every scope needed; the body is the policy error', async () => {
    const { res, body } = await callTool(await token('mcp:tools'), WRITE_TOOL);
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${resource}.well-known/oauth-protected-resource", ` +
        'scope="mcp:tools mcp:tools:write", error="insufficient_scope", ' +
        'error_description="This request needs the scope mcp:tools:write"',
    );
    expect(body).toMatchObject({
      jsonrpc: '2.0',
      id: 41,
      error: { message: 'Policy violation', data: { policy: 'tool-scopes', required_scopes: ['mcp:tools:write'] } },
    });
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_oauth_failures_total\{reason="insufficient_scope"[,}]/);
    expect(metrics).toMatch(/policy="tool-scopes",rule="require-write-scope",action="block"/);
  });

  it('a token with it passes the policy (the refusal names no scope then)', async () => {
    const { res } = await callTool(await token('mcp:tools mcp:tools:write'), WRITE_TOOL);
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(res.status).not.toBe(403);
  });
});

describe('the official SDK client', () => {
  it('a client whose token has the scope lists and calls the write tool', async () => {
    const client = await connect('writer', 'writer-secret', 'mcp:tools mcp:tools:write');
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain(WRITE_TOOL);
      const result = await client.callTool({ name: WRITE_TOOL, arguments: {} });
      expect(result.isError).not.toBe(true);
      expect(JSON.stringify(result.content)).toMatch(/logging/i);
      expect(scopesOf(as.issued.at(-1) as string)).toEqual(['mcp:tools', 'mcp:tools:write']);
    } finally {
      await client.close();
    }
  }, 30_000);

  it('a client whose token lacks it: other tools work, the write tool is not listed and its call refused (403)', async () => {
    const client = await connect('reader', 'reader-secret', 'mcp:tools');
    try {
      const listed = (await client.listTools()).tools.map((t) => t.name);
      expect(listed).toContain('echo');
      expect(listed).not.toContain(WRITE_TOOL); // strict mode: a tool the caller may not call is not listed
      const echo = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
      expect(JSON.stringify(echo.content)).toContain('hi');
      // The SDK reads the insufficient_scope challenge, gets a token again, and gives up on a second 403.
      await expect(client.callTool({ name: WRITE_TOOL, arguments: {} })).rejects.toThrow(/403/);
      const readers = as.issued.filter((t) => claimsOf(t).sub === 'client:reader');
      expect(readers.length).toBeGreaterThan(1); // the first token, and the step-up attempt
      for (const t of readers) expect(scopesOf(t)).not.toContain('mcp:tools:write');
    } finally {
      await client.close();
    }
  }, 30_000);

  it('a client not granted the scope cannot get a token with it: the authorization server refuses', async () => {
    await expect(connect('reader', 'reader-secret', 'mcp:tools mcp:tools:write')).rejects.toThrow();
  }, 30_000);
});

describe('without OAuth (the shipped default)', () => {
  let plain: StartedService;
  beforeAll(async () => {
    plain = await startService('configs/typed-proxy.yaml', {
      env: { PROXY_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'typed-proxy-scopes-')), 'audit.db') },
    });
  }, 60_000);
  afterAll(() => plain?.close());

  it('the policy never fires: the write tool is listed and callable', async () => {
    const client = new Client({ name: 'no-oauth', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${plain.url}/`)));
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain(WRITE_TOOL);
      const result = await client.callTool({ name: WRITE_TOOL, arguments: {} });
      expect(result.isError).not.toBe(true);
    } finally {
      await client.close();
    }
  }, 30_000);
});
