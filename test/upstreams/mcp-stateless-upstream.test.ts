/**
 * The gateway's own calls of an MCP upstream that speaks only 2026-07-28 (issue 30): the runtime's
 * JSON-RPC caller (runtime/upstreams/rpc-over-http.ts) tries `initialize`, is refused -32022 with a
 * supported list naming 2026-07-28, and from then on calls statelessly in that revision. So an
 * active health check (`jsonrpc_method: ping`, with `protocol: mcp`) finds such an upstream
 * healthy instead of marking it down, and a `via: call` route reaches it; a version the server does
 * not list is still a failed handshake (a clear upstream error, the check unhealthy).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type ModernServer, modern, startModernOnlyServer } from '../helpers/mcp-2026-server.ts';
import { until } from '../helpers/servers.ts';
import { postRpc, writeServiceFile } from '../helpers/services.ts';

const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function service(url: string): Promise<StartedService> {
  const file = writeServiceFile(`service: mcp-stateless
listen: { port: 0 }
metrics: { port: 0 }
admin: { port: 0 }
upstreams:
  mcp:
    kind: jsonrpc
    protocol: mcp
    url: "${url}"
    health_check: { interval_ms: 200, jsonrpc_method: ping, timeout_ms: 1000 }
routes:
  - match: { method: POST, path: /call }
    dialect: jsonrpc
    pipeline: [{ proxy: { upstream: mcp, via: call } }]
`);
  const svc = await startService(file, { warmupMs: 2000 });
  opened.push(svc);
  return svc;
}

async function checkHealthy(svc: StartedService): Promise<boolean | undefined> {
  const body = (await (await fetch(`${svc.adminUrl}/admin/health`)).json()) as {
    checks: Record<string, { ok: boolean }>;
  };
  return body.checks['upstream:mcp']?.ok;
}

describe('an MCP upstream that speaks only 2026-07-28, called by the gateway itself', () => {
  it('the ping health check passes and a via: call route answers; every call carries the revision’s _meta and headers', async () => {
    const upstream: ModernServer = await startModernOnlyServer();
    opened.push(upstream);
    const svc = await service(upstream.url);
    await until(async () => (await checkHealthy(svc)) === true, 10_000);
    const res = await postRpc(`${svc.url}/call`, {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'ünïcode' } },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: unknown; result?: { content?: unknown } };
    expect(body.id).toBe(7);
    expect(body.result?.content).toEqual([{ type: 'text', text: 'Echo: ünïcode' }]);
    const call = upstream.received.filter((r) => r.method === 'tools/call').at(-1);
    const meta = (call?.body.params as Record<string, Record<string, unknown>> | undefined)?._meta ?? {};
    expect(meta['io.modelcontextprotocol/protocolVersion']).toBe(modern);
    expect(meta['io.modelcontextprotocol/clientCapabilities']).toEqual({});
    expect(call?.headers['mcp-name']).toBe('echo');
    const pings = upstream.received.filter((r) => r.method === 'ping');
    expect(pings.length).toBeGreaterThan(0);
    expect(pings.every((p) => p.headers['mcp-method'] === 'ping' && p.headers['mcp-session-id'] === undefined)).toBe(
      true,
    );
  });

  it('a server that refuses initialize without listing 2026-07-28 stays a failed handshake', async () => {
    // The fixture refuses every version but its own; point the gateway at a server that lists another.
    const { createServer } = await import('node:http');
    const server = createServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          error: { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2099-01-01'] } },
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    opened.push({ close: () => new Promise<void>((r) => server.close(() => r())) });
    const port = (server.address() as { port: number }).port;
    const svc = await service(`http://127.0.0.1:${port}/mcp`);
    const res = await postRpc(`${svc.url}/call`, { jsonrpc: '2.0', id: 1, method: 'ping' });
    expect(res.status).toBe(502);
    expect(JSON.stringify(await res.json())).toContain('MCP initialize failed');
    await until(async () => (await checkHealthy(svc)) === false, 10_000);
  });
});
