/**
 * A `jsonrpc` upstream with several endpoints in front of real stateful MCP servers (the
 * official SDK's streamable-HTTP transport), used by the official SDK client through a service:
 * every request of a session lands on the endpoint that issued it, initializes spread over the
 * endpoints, a dead endpoint's sessions are told to initialize again (404) while new sessions go
 * to the others, and the gateway's own session (via: call) sticks and moves the same way.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type McpEndpoint, mcpEndpoint } from '../helpers/mcp-endpoint.ts';
import { sample } from '../helpers/prometheus.ts';
import { until } from '../helpers/servers.ts';
import { postRpc, writeServiceFile } from '../helpers/services.ts';

const opened: Array<{ close(): unknown }> = [];

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function endpoints(n: number): Promise<McpEndpoint[]> {
  const list: McpEndpoint[] = [];
  for (let i = 0; i < n; i++) {
    const e = await mcpEndpoint(`e${i + 1}`);
    opened.push(e);
    list.push(e);
  }
  return list;
}

async function service(list: McpEndpoint[], extra = ''): Promise<StartedService> {
  const file = writeServiceFile(`service: mcp-balanced
listen: { port: 0 }
metrics: { port: 0 }
admin: { port: 0 }
upstreams:
  mcp:
    kind: jsonrpc
    protocol: mcp
    endpoints: [${list.map((e) => `{ url: "${e.url}" }`).join(', ')}]
    health_check: { interval_ms: 200, jsonrpc_method: ping, timeout_ms: 1000 }
${extra}
routes:
  # As the typed proxy's JSON-RPC route: parsed, then forwarded (GET streams and DELETE pass through).
  - match: { method: [POST, GET, DELETE], path: / }
    dialect: jsonrpc
    pipeline: [{ jsonrpc-parse: {} }, { proxy: { upstream: mcp } }]
  - match: { method: POST, path: /call }
    dialect: jsonrpc
    pipeline: [{ proxy: { upstream: mcp, via: call } }]
`);
  const svc = await startService(file, { warmupMs: 2000 });
  opened.push(svc);
  return svc;
}

async function client(svc: StartedService): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const c = new Client({ name: 'sticky-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/`));
  await c.connect(transport);
  opened.push({ close: () => c.close().catch(() => {}) });
  return { client: c, transport };
}

async function whoami(c: Client): Promise<string> {
  const r = (await c.callTool({ name: 'whoami', arguments: {} })) as { content: Array<{ text: string }> };
  return r.content[0]?.text as string;
}

/**
 * The endpoint whose server holds the session (the client's id is `<endpoint tag>.<endpoint's
 * id>.<16 hex of the owner's MAC>`: endpoint-tags.ts, then the proxy's session-binding.ts).
 */
function holder(list: McpEndpoint[], sessionId: string | undefined): string | undefined {
  const own = sessionId?.slice(9, -17);
  return list.find((e) => own !== undefined && e.sessions.has(own))?.name;
}

interface UpstreamHealth {
  ok: boolean;
  detail?: { endpoints: Array<{ state: string; check: { kind: string; healthy?: boolean } }> };
}

async function upstreamHealth(svc: StartedService): Promise<UpstreamHealth | undefined> {
  const body = (await (await fetch(`${svc.adminUrl}/admin/health`)).json()) as {
    checks: Record<string, UpstreamHealth>;
  };
  return body.checks['upstream:mcp'];
}

describe('jsonrpc upstream with several endpoints (MCP sessions)', () => {
  it('every call of a session lands on the endpoint that issued it; sessions spread over the endpoints', async () => {
    const list = await endpoints(3);
    const svc = await service(list);
    await until(async () => (await upstreamHealth(svc))?.detail?.endpoints.every((e) => e.check.healthy) === true);
    const clients = [];
    for (let n = 0; n < 6; n++) clients.push(await client(svc));
    const homes = new Set<string>();
    for (const { client: c, transport } of clients) {
      const home = holder(list, transport.sessionId);
      expect(home).toBeDefined();
      homes.add(home as string);
      // Interleaved with the other clients' calls: each answer comes from the session's own endpoint.
      for (let n = 0; n < 4; n++) expect(await whoami(c)).toBe(home);
      expect((await c.listTools()).tools.map((t) => t.name)).toEqual(['whoami']);
    }
    // Round-robin initializes: two sessions per endpoint.
    expect(homes.size).toBe(3);
    // The id the client holds names its endpoint: the same endpoint's sessions share the tag.
    const tags = new Map<string, string>();
    for (const { transport } of clients) {
      const tag = transport.sessionId?.slice(0, 8) as string;
      const home = holder(list, transport.sessionId) as string;
      expect(tags.get(home) ?? tag).toBe(tag);
      tags.set(home, tag);
    }
    expect(new Set(tags.values()).size).toBe(3);
    const h = await upstreamHealth(svc);
    expect(h?.detail?.endpoints.map((e) => e.check.kind)).toEqual(['jsonrpc', 'jsonrpc', 'jsonrpc']);
    // Three servers, a service and six SDK clients started cold: on both cores busy this took over 30 s.
  }, 120_000);

  it('a dead endpoint: its sessions are told to initialize again, new sessions go to the others, the rest keep working', async () => {
    const list = await endpoints(3);
    const svc = await service(list);
    const clients = [];
    for (let n = 0; n < 6; n++) clients.push(await client(svc));
    const [, dying] = list as [McpEndpoint, McpEndpoint, McpEndpoint];
    dying.close();
    const orphans = clients.filter((c) => holder(list, c.transport.sessionId) === dying.name);
    const others = clients.filter((c) => holder(list, c.transport.sessionId) !== dying.name);
    expect(orphans.length).toBe(2);
    for (const o of orphans) await expect(whoami(o.client)).rejects.toThrow(/404|session/i);
    for (const o of others) expect(await whoami(o.client)).toBe(holder(list, o.transport.sessionId));
    // New sessions (at once, before any check noticed) never land on the dead endpoint.
    for (let n = 0; n < 4; n++) {
      const fresh = await client(svc);
      const home = holder(list, fresh.transport.sessionId);
      expect(home).not.toBe(dying.name);
      expect(await whoami(fresh.client)).toBe(home);
    }
    // Its ping check fails too (a refused request already marked it down; the check says so next).
    await until(async () => (await upstreamHealth(svc))?.detail?.endpoints[1]?.check.healthy === false, 5000);
    expect((await upstreamHealth(svc))?.detail?.endpoints[1]?.state).toBe('down');
    const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    const label = `{upstream="mcp",endpoint="${dying.url}",service="mcp-balanced"}`;
    expect(sample(text, `switchyard_upstream_endpoint_check_healthy${label}`)).toBe(0);
  });

  it("the gateway's own session (via: call) sticks to one endpoint and moves when that endpoint dies", async () => {
    const list = await endpoints(3);
    const svc = await service(list);
    const call = async () => {
      const res = await fetch(`${svc.url}/call`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'whoami', arguments: {} },
        }),
      });
      const body = (await res.json()) as { result?: { content: Array<{ text: string }> } };
      return body.result?.content[0]?.text;
    };
    const first = await call();
    expect(first).toMatch(/^e[123]$/);
    for (let n = 0; n < 5; n++) expect(await call()).toBe(first);
    list.find((e) => e.name === first)?.close();
    const moved = await call();
    expect(moved).toMatch(/^e[123]$/);
    expect(moved).not.toBe(first);
    for (let n = 0; n < 5; n++) expect(await call()).toBe(moved);
  });

  it("closing the upstream ends the sessions the gateway holds (its own and its health checks')", async () => {
    const list = await endpoints(3);
    const svc = await service(list);
    await until(async () => (await upstreamHealth(svc))?.detail?.endpoints.every((e) => e.check.healthy) === true);
    const res = await fetch(`${svc.url}/call`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
    });
    expect(res.status).toBe(200);
    await res.text();
    // One check session per endpoint, and the gateway's own on one of them.
    expect(list.map((e) => e.sessions.size).sort()).toEqual([1, 1, 2]);
    await svc.close();
    await until(() => list.every((e) => e.sessions.size === 0), 5000);
  });

  it('a session opened through one gateway process is served by another (the binding is in the id)', async () => {
    const list = await endpoints(3);
    const first = await service(list);
    const second = await service(list);
    const version = { 'mcp-protocol-version': '2025-06-18' };
    const init = await postRpc(`${first.url}/`, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'two-gateways', version: '1' } },
    });
    await init.text();
    const sid = init.headers.get('mcp-session-id') as string;
    const home = holder(list, sid);
    expect(home).toBeDefined();
    const session = { ...version, 'mcp-session-id': sid };
    expect(
      (await postRpc(`${second.url}/`, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status,
    ).toBe(202);
    for (let n = 0; n < 3; n++) {
      const res = await postRpc(
        `${second.url}/`,
        { jsonrpc: '2.0', id: 2 + n, method: 'tools/call', params: { name: 'whoami', arguments: {} } },
        session,
      );
      // The SDK server answers an SSE stream: one event with the response.
      const text = await res.text();
      expect(text).toContain(`"text":"${home}"`);
    }
  });

  it('with consistent-hash on Mcp-Session-Id, sessions still stick to the endpoint that issued them', async () => {
    const list = await endpoints(3);
    const svc = await service(list, '    balance: consistent-hash\n    hash_on: { header: Mcp-Session-Id }');
    // Sessions still stick (learned from the initialize answers), whatever the hash says.
    const clients = [];
    for (let n = 0; n < 4; n++) clients.push(await client(svc));
    for (const c of clients) expect(await whoami(c.client)).toBe(holder(list, c.transport.sessionId));
  });
});
