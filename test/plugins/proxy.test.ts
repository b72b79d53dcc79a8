import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import healthPlugin from '../../plugins/health/index.ts';
import proxyPlugin from '../../plugins/proxy/index.ts';
import { type Dialect, jsonRpcDialect } from '../../runtime/dialects.ts';
import { mapRpcResponses, type RpcResponseMap } from '../../runtime/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import type { StageInstance } from '../../runtime/plugin.ts';
import type { GatewayContext, Stage } from '../../runtime/state.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { createUpstream, type UpstreamConfig } from '../../runtime/upstreams/create.ts';
import type { Upstream } from '../../runtime/upstreams/types.ts';
import { closeNow, everythingServer, freePort, listenLocal, until } from '../helpers/servers.ts';
import { postRpc } from '../helpers/services.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const closers: Array<() => Promise<unknown> | unknown> = [];

/** `stages` behind a real Koa server, run as the request core runs a route. */
async function gateway(stages: Stage[], dialect?: Dialect): Promise<string> {
  const server = await serveStages(stages, { dialect, state: { requestId: 'req-42', traceparent: TRACEPARENT } });
  closers.push(server.close);
  return server.url;
}

function upstream(config: UpstreamConfig): Upstream {
  const u = createUpstream('up', config, { logger: silentLogger, configDir: process.cwd() });
  closers.push(() => u.close());
  return u;
}

async function proxyStage(u: Upstream, options: Record<string, unknown> = {}): Promise<Stage> {
  const env = createTestEnv({ upstreams: { up: u } });
  const created = await proxyPlugin.create(
    { upstream: 'up', forward_headers: [], via: 'auto', ...options } as never,
    env,
  );
  return (created as StageInstance).handle;
}

interface Seen {
  rpcResponse?: unknown;
  ctx?: GatewayContext;
}

/** A stage whose answer phase applies `maps` to the JSON-RPC response, then records the response sent. */
function hooksStage(maps: RpcResponseMap[], seen: Seen): Stage {
  return async (ctx, next) => {
    seen.ctx = ctx;
    await next();
    for (const map of maps) await mapRpcResponses(ctx, map);
    await mapRpcResponses(ctx, (msg) => {
      seen.rpcResponse = msg;
      return msg;
    });
  };
}

const addTag: RpcResponseMap = (msg) => ({ ...msg, result: { ...(msg.result as object), tagged: true } });

// The upstream: JSON-RPC answers as JSON or SSE, echoing what it received.
let release: () => void = () => {};
let sseClosed = 0;
async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body = '';
  for await (const chunk of req) body += chunk;
  const msg = body ? JSON.parse(body) : {};
  const answer = { jsonrpc: '2.0', id: msg.id, result: { method: msg.method, headers: req.headers, url: req.url } };
  if (req.method === 'POST' && msg.id === undefined) {
    res.writeHead(202).end();
  } else if (req.url?.startsWith('/sse')) {
    res.on('close', () => sseClosed++);
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'mcp-session-id': 'sess-1',
      'cache-control': 'no-cache',
    });
    res.write(': comment\n\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n');
    await new Promise<void>((r) => {
      release = r;
    });
    res.end(`id: ev-2\nevent: message\ndata: ${JSON.stringify(answer)}\n\n`);
  } else if (req.url === '/slow') {
    setTimeout(() => res.end('{}'), 1000);
  } else {
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'sess-1', connection: 'keep-alive' });
    res.end(JSON.stringify(answer));
  }
}

const server = createServer((req, res) => void handle(req, res));
let base: string;
beforeAll(async () => {
  base = await listenLocal(server);
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  closeNow(server);
});

describe('proxy stage: HTTP upstreams', () => {
  it('forwards the body and the allowed headers, and copies the answer', async () => {
    const url = await gateway([await proxyStage(upstream({ kind: 'jsonrpc', url: base }))]);
    // The upstream's session id reaches the client bound to it (session-binding.ts): id + MAC.
    const opened = await postRpc(`${url}/rpc`, { jsonrpc: '2.0', id: 0, method: 'initialize' });
    const session = opened.headers.get('mcp-session-id') ?? '';
    expect(session).toMatch(/^sess-1\.[0-9a-f]{16}$/);
    // An id this gateway did not issue (or the bare upstream id) reaches nothing.
    for (const forged of ['client-sess', 'sess-1']) {
      expect(
        (await postRpc(`${url}/rpc`, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-session-id': forged }))
          .status,
      ).toBe(404);
    }
    const res = await postRpc(
      `${url}/rpc?x=1`,
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      {
        'mcp-session-id': session,
        authorization: 'Bearer secret',
        cookie: 'a=b',
      },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBe(session);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = await res.json();
    expect(body.id).toBe(1);
    const h = body.result.headers;
    expect(body.result.url).toBe('/rpc?x=1');
    expect(h['mcp-session-id']).toBe('sess-1');
    expect(h.accept).toBe('application/json, text/event-stream');
    expect(h['x-request-id']).toBe('req-42');
    expect(h.traceparent).toBe(TRACEPARENT);
    expect(h.authorization).toBeUndefined();
    expect(h.cookie).toBeUndefined();
  });

  it('passes authorization only when forward_headers lists it, and honours a fixed path', async () => {
    const stage = await proxyStage(upstream({ kind: 'http', url: base }), {
      forward_headers: ['Authorization'],
      path: '/fixed',
    });
    const url = await gateway([stage]);
    const body = await (
      await postRpc(`${url}/whatever`, { jsonrpc: '2.0', id: 2, method: 'm' }, { authorization: 'Bearer t' })
    ).json();
    expect(body.result.headers.authorization).toBe('Bearer t');
    expect(body.result.url).toBe('/fixed');
  });

  it('re-serialises the message when a stage changed it', async () => {
    const rewrite: Stage = async (ctx, next) => {
      ctx.state.rawBody = Buffer.from('{"jsonrpc":"2.0","id":3,"method":"original"}');
      ctx.state.rpc = { jsonrpc: '2.0', id: 3, method: 'rewritten' };
      ctx.state.rpcModified = true;
      await next();
    };
    const url = await gateway([rewrite, await proxyStage(upstream({ kind: 'jsonrpc', url: base }))]);
    const body = await (await postRpc(url, { ignored: true })).json();
    expect(body.result.method).toBe('rewritten');
  });

  it('applies answer-phase maps in order to a JSON answer', async () => {
    const seen: Seen = {};
    const second: RpcResponseMap = (msg) => ({
      ...msg,
      result: { sawTag: (msg.result as { tagged?: boolean }).tagged },
    });
    const url = await gateway([
      hooksStage([addTag, second], seen),
      await proxyStage(upstream({ kind: 'jsonrpc', url: base })),
    ]);
    const res = await postRpc(url, { jsonrpc: '2.0', id: 'a', method: 'tools/list' });
    const body = await res.json();
    expect(body).toEqual({ jsonrpc: '2.0', id: 'a', result: { sawTag: true } });
    expect(Number(res.headers.get('content-length'))).toBe(JSON.stringify(body).length);
    expect(seen.rpcResponse).toEqual(body);
  });

  it('streams SSE through event by event, rewriting only JSON-RPC responses', async () => {
    const seen: Seen = {};
    const url = await gateway([hooksStage([addTag], seen), await proxyStage(upstream({ kind: 'jsonrpc', url: base }))]);
    const res = await postRpc(`${url}/sse`, { jsonrpc: '2.0', id: 9, method: 'tools/call' });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('mcp-session-id')).toMatch(/^sess-1\.[0-9a-f]{16}$/);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // The first events must arrive while the upstream still holds the response back.
    while (!text.includes('notifications/progress')) text += decoder.decode((await reader.read()).value);
    expect(text).toBe(
      ': comment\n\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n',
    );
    release();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value);
    const last = text.split('\n\n').filter(Boolean).at(-1)!;
    expect(last.startsWith('id: ev-2\nevent: message\ndata: ')).toBe(true);
    const msg = JSON.parse(last.split('data: ')[1]);
    expect(msg).toMatchObject({ jsonrpc: '2.0', id: 9, result: { method: 'tools/call', tagged: true } });
    // The maps see an SSE answer's response as its event passes, after the pipeline returned.
    expect(seen.rpcResponse).toEqual(msg);
  });

  it('streams SSE untouched when no hook is registered', async () => {
    const url = await gateway([await proxyStage(upstream({ kind: 'jsonrpc', url: base }))]);
    const res = await postRpc(`${url}/sse`, { jsonrpc: '2.0', id: 1, method: 'x' });
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('notifications/progress');
    release();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toContain('"id":1');
    expect(rest).not.toContain('tagged');
  });

  it('closes the upstream stream when the client goes away', async () => {
    const url = await gateway([await proxyStage(upstream({ kind: 'jsonrpc', url: base }))]);
    const abort = new AbortController();
    const res = await postRpc(`${url}/sse`, { jsonrpc: '2.0', id: 1, method: 'x' }, {}, abort.signal);
    await res.body!.getReader().read();
    const before = sseClosed;
    abort.abort();
    await until(() => sseClosed > before, 2000);
    release();
  });

  it('via: call sends the message through the upstream call() and answers JSON', async () => {
    const url = await gateway([await proxyStage(upstream({ kind: 'jsonrpc', url: base }), { via: 'call' })]);
    const res = await postRpc(`${url}/ignored`, { jsonrpc: '2.0', id: 'v', method: 'tools/list' });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 'v', result: { method: 'tools/list', url: '/' } });
    expect((await fetch(url)).status).toBe(405);
  });

  it('passes a notification through with the upstream 202', async () => {
    const url = await gateway([await proxyStage(upstream({ kind: 'jsonrpc', url: base }))]);
    const res = await postRpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(res.status).toBe(202);
    expect(await res.text()).toBe('');
  });

  it('answers 502 upstream_error when the upstream is down and 504 upstream_timeout when slow', async () => {
    const down = await gateway([
      await proxyStage(upstream({ kind: 'http', url: `http://127.0.0.1:${await freePort()}` })),
    ]);
    const r1 = await postRpc(down, { jsonrpc: '2.0', id: 1, method: 'x' });
    expect(r1.status).toBe(502);
    expect(await r1.json()).toMatchObject({ error: 'upstream_error' });

    const slow = await gateway([await proxyStage(upstream({ kind: 'http', url: base }), { timeout_ms: 100 })]);
    const r2 = await postRpc(`${slow}/slow`, { jsonrpc: '2.0', id: 1, method: 'x' });
    expect(r2.status).toBe(504);
    expect(await r2.json()).toMatchObject({ error: 'upstream_timeout' });
  });
});

describe('proxy stage: stdio upstream (reference server)', () => {
  let url: string;
  const seen: Seen = {};

  beforeAll(async () => {
    const u = upstream({ kind: 'stdio', command: process.execPath, args: [everythingServer, 'stdio'] });
    await u.ready(15000);
    url = await gateway([hooksStage([addTag], seen), await proxyStage(u)], jsonRpcDialect);
  });

  it('calls the child and answers 200 JSON with the answer phase applied', async () => {
    const res = await postRpc(url, {
      jsonrpc: '2.0',
      id: 'c1',
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'via stdio' } },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await res.json();
    expect(body).toMatchObject({ id: 'c1', result: { content: [{ text: 'Echo: via stdio' }], tagged: true } });
    expect(seen.rpcResponse).toEqual(body);
  });

  it('answers 202 with no body to a notification', async () => {
    const res = await postRpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(res.status).toBe(202);
    expect(await res.text()).toBe('');
  });

  it('answers 405 with Allow to GET (no server stream), 400 to a DELETE naming no session', async () => {
    const get = await fetch(url, { headers: { accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, DELETE');
    const del = await fetch(url, { method: 'DELETE' });
    expect(del.status).toBe(400);
    expect((await del.json()).error.message).toMatch(/Mcp-Session-Id header required/);
  });

  it('refuses a body that is not a JSON-RPC message', async () => {
    const res = await postRpc(url, { hello: 'world' });
    expect(res.status).toBe(400);
  });
});

describe('health stage', () => {
  async function healthUrl(options: Record<string, unknown>, upstreams: Record<string, Upstream> = {}) {
    const env = createTestEnv({ upstreams });
    env.service.startedAt = new Date(Date.now() - 3500);
    const stage = (await healthPlugin.create({ include_uptime: true, ...options } as never, env)) as Stage;
    return gateway([stage]);
  }

  it('reports healthy with uptime and version while the upstream is reachable, 503 when not', async () => {
    const port = await freePort();
    const target = createServer((_q, s) => s.end());
    await listenLocal(target, port);
    const u = upstream({ kind: 'http', url: `http://127.0.0.1:${port}`, health_check: { interval_ms: 100 } });
    await u.ready(3000);
    const url = await healthUrl({ upstream: 'main' }, { main: u });

    const ok = await fetch(url);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({
      status: 'healthy',
      upstream: 'connected',
      uptime_seconds: 3,
      version: '0.0.0-test',
    });

    target.close();
    await until(() => !u.health().connected, 3000);
    const bad = await fetch(url);
    expect(bad.status).toBe(503);
    expect(await bad.json()).toEqual({ status: 'unhealthy', upstream: 'disconnected', error: 'connection refused' });
  });

  it('without an upstream reports the process; uptime can be left out', async () => {
    expect(await (await fetch(await healthUrl({}))).json()).toEqual({
      status: 'healthy',
      uptime_seconds: 3,
      version: '0.0.0-test',
    });
    expect(await (await fetch(await healthUrl({ include_uptime: false }))).json()).toEqual({
      status: 'healthy',
      version: '0.0.0-test',
    });
  });
});
