/**
 * The official MCP SDK client talking to the reference server through a real service whose only
 * stages are `proxy` (and `health`): over a stdio upstream and over a streamable-HTTP upstream.
 */
import type { ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { everythingServer, freePort, startEverythingHttp, stop } from '../helpers/servers.ts';
import { postRpc, writeServiceFile } from '../helpers/services.ts';

function writeConfig(upstream: Record<string, unknown>): string {
  const config = {
    service: 'proxy-test',
    version: '9.9.9',
    listen: { port: 0 },
    upstreams: { mcp: upstream },
    routes: [
      { match: { method: 'GET', path: '/health' }, pipeline: [{ health: { upstream: 'mcp' } }] },
      {
        match: { method: ['POST', 'GET', 'DELETE'], path: '/' },
        dialect: 'jsonrpc',
        pipeline: [{ proxy: { upstream: 'mcp' } }],
      },
    ],
  };
  return writeServiceFile(JSON.stringify(config)); // JSON is YAML
}

async function listAndEcho(url: string) {
  const client = new Client({ name: 'proxy-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/`)));
  try {
    const tools = await client.listTools();
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'through the proxy' } });
    return { names: tools.tools.map((t) => t.name), echo };
  } finally {
    await client.close();
  }
}

describe('MCP SDK client through the proxy: stdio upstream', () => {
  let svc: StartedService;
  beforeAll(async () => {
    const file = writeConfig({ kind: 'stdio', command: process.execPath, args: [everythingServer, 'stdio'] });
    svc = await startService(file, { warmupMs: 15000 });
  });
  afterAll(() => svc?.close());

  it('connects, lists tools and calls echo', async () => {
    const { names, echo } = await listAndEcho(svc.url);
    expect(names).toContain('echo');
    expect(echo.content).toEqual([{ type: 'text', text: 'Echo: through the proxy' }]);
  });

  it('answers GET on the JSON-RPC endpoint with 405 and Allow: POST, DELETE (a stdio session is ended by DELETE)', async () => {
    const res = await fetch(`${svc.url}/`, { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST, DELETE');
  });

  it('reports health with the service version', async () => {
    const res = await fetch(`${svc.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'healthy', upstream: 'connected', version: '9.9.9' });
  });
});

describe('MCP SDK client through the proxy: streamable-HTTP upstream', () => {
  let svc: StartedService;
  let child: ChildProcess;
  let port: number;
  beforeAll(async () => {
    port = await freePort();
    child = await startEverythingHttp(port);
    const file = writeConfig({
      kind: 'jsonrpc',
      url: `http://127.0.0.1:${port}/mcp`,
      protocol: 'mcp',
      health_check: { interval_ms: 200 },
    });
    svc = await startService(file, { warmupMs: 10000 });
  });
  afterAll(async () => {
    await svc?.close();
    await stop(child);
  });

  it('connects with a session, lists tools and calls echo (SSE answers stream through)', async () => {
    const { names, echo } = await listAndEcho(svc.url);
    expect(names).toContain('echo');
    expect(echo.content).toEqual([{ type: 'text', text: 'Echo: through the proxy' }]);
  });

  it('health flips to 503 when the upstream goes away and back when it returns', async () => {
    await stop(child);
    const deadline = Date.now() + 3000;
    let res = await fetch(`${svc.url}/health`);
    while (res.status !== 503 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      res = await fetch(`${svc.url}/health`);
    }
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({
      status: 'unhealthy',
      upstream: 'disconnected',
      error: expect.any(String),
    });

    const rpc = await postRpc(`${svc.url}/`, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(rpc.status).toBe(502);

    child = await startEverythingHttp(port);
    const back = Date.now() + 3000;
    while ((await fetch(`${svc.url}/health`)).status !== 200 && Date.now() < back) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
  });
});
