import type { ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../runtime/errors.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createUpstream, type UpstreamConfig } from '../../runtime/upstreams/create.ts';
import type { HttpUpstream, RpcUpstream, Upstream } from '../../runtime/upstreams/types.ts';
import { closeNow, freePort, listenLocal, startEverythingHttp, stop, until } from '../helpers/servers.ts';

const deps = { logger: silentLogger, configDir: process.cwd() };
const opened: Upstream[] = [];

function upstream<T extends Upstream = HttpUpstream>(config: UpstreamConfig): T {
  const u = createUpstream('test', config, deps);
  opened.push(u);
  return u as T;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let out = '';
  for await (const chunk of stream) out += chunk.toString();
  return out;
}

let releaseStream: () => void = () => {};
let healthStatus = 200;

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readAll(req);
  const url = req.url ?? '/';
  if (url === '/sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    // The rest only comes once the client proved it received the first event.
    await new Promise<void>((r) => {
      releaseStream = r;
    });
    res.end('data: two\n\n');
  } else if (url === '/slow') {
    setTimeout(() => res.end('late'), 1500);
  } else if (url === '/health') {
    res.writeHead(healthStatus).end();
  } else if (url === '/rpc' || url === '/rpc-sse') {
    const msg = JSON.parse(body);
    const answer = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { method: msg.method } });
    if (msg.id === undefined) {
      res.writeHead(202).end();
    } else if (url === '/rpc') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    } else {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress' })}\n\n`);
      res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: 'other', result: {} })}\n\n`);
      res.end(`id: 1\ndata: ${answer}\n\n`);
    }
  } else {
    res.writeHead(201, { 'content-type': 'application/json', 'x-upstream': 'yes' });
    res.end(JSON.stringify({ method: req.method, url, headers: req.headers, body }));
  }
}

const server = createServer((req, res) => void handle(req, res));
let base: string;

beforeAll(async () => {
  base = await listenLocal(server);
});

afterAll(async () => {
  await Promise.all(opened.map((u) => u.close()));
  closeNow(server);
});

describe('http upstream: forwarding', () => {
  it('forwards method, path, headers and body and returns status, headers and a body stream', async () => {
    const up = upstream({ kind: 'http', url: base });
    const res = await up.forward({
      method: 'POST',
      path: '/echo?x=1',
      headers: { 'content-type': 'text/plain', 'x-custom': 'a', host: 'evil.example', connection: 'close' },
      body: 'payload',
    });
    expect(res.status).toBe(201);
    expect(res.headers['x-upstream']).toBe('yes');
    const seen = JSON.parse(await readAll(res.body));
    expect(seen).toMatchObject({ method: 'POST', url: '/echo?x=1', body: 'payload' });
    expect(seen.headers['x-custom']).toBe('a');
    expect(seen.headers.host).not.toBe('evil.example');
  });

  it("appends request paths to the url's base path", async () => {
    const up = upstream({ kind: 'http', url: `${base}/base/` });
    const root = JSON.parse(await readAll((await up.forward({ method: 'GET', path: '/?q=1', headers: {} })).body));
    expect(root.url).toBe('/base?q=1');
    const sub = JSON.parse(await readAll((await up.forward({ method: 'GET', path: '/a/b', headers: {} })).body));
    expect(sub.url).toBe('/base/a/b');
  });

  it('streams an SSE body event by event, without waiting for its end', async () => {
    const up = upstream({ kind: 'http', url: base });
    const res = await up.forward({ method: 'GET', path: '/sse', headers: {} });
    const chunks: string[] = [];
    for await (const chunk of res.body) {
      chunks.push(chunk.toString());
      if (chunks.length === 1) releaseStream();
    }
    expect(chunks[0]).toBe('data: one\n\n');
    expect(chunks.join('')).toBe('data: one\n\ndata: two\n\n');
  });

  it('answers upstream_timeout when headers do not come in time (config and per request)', async () => {
    const up = upstream({ kind: 'http', url: base, timeout_ms: 200 });
    const err = await up.forward({ method: 'GET', path: '/slow', headers: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.kind).toBe('upstream_timeout');

    const lenient = upstream({ kind: 'http', url: base, timeout_ms: 10 });
    const ok = await lenient.forward({ method: 'GET', path: '/slow', headers: {}, timeoutMs: 5000 });
    expect(await readAll(ok.body)).toBe('late');
  });

  it('answers upstream_error when the connection is refused, and reports it in health', async () => {
    const up = upstream({ kind: 'http', url: `http://127.0.0.1:${await freePort()}` });
    const err = await up.forward({ method: 'GET', path: '/', headers: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.kind).toBe('upstream_error');
    expect(err.message).toMatch(/connection refused/);
    expect(up.health()).toMatchObject({ connected: false, error: 'connection refused' });
  });
});

describe('http upstream: health', () => {
  it('flips to disconnected when the server goes away and back when it returns', async () => {
    const port = await freePort();
    const target = createServer((_req, res) => res.end('ok'));
    await listenLocal(target, port);
    const up = upstream({ kind: 'http', url: `http://127.0.0.1:${port}`, health_check: { interval_ms: 100 } });
    await up.ready(3000);
    expect(up.health().connected).toBe(true);

    closeNow(target);
    await until(() => !up.health().connected, 2000);
    expect(up.health().error).toBe('connection refused');
    await expect(up.ready(200)).rejects.toThrow(/not ready/);

    await listenLocal(target, port);
    await until(() => up.health().connected, 2000);
    expect(up.health().error).toBeUndefined();
    target.close();
  });

  it('uses the health_check path when set: a 5xx answer means disconnected', async () => {
    healthStatus = 503;
    const up = upstream({ kind: 'http', url: base, health_check: { interval_ms: 100, path: '/health' } });
    await until(() => up.health().error === 'health check answered 503', 2000);
    expect(up.health().connected).toBe(false);
    healthStatus = 200;
    await up.ready(2000);
  });
});

describe('jsonrpc upstream: call()', () => {
  const msg = (id: string | number, method = 'ping') => ({ jsonrpc: '2.0' as const, id, method });

  it('calls a JSON answering server, restoring the caller id', async () => {
    const up = upstream<RpcUpstream>({ kind: 'jsonrpc', url: `${base}/rpc` });
    expect(await up.call(msg('abc', 'tools/list'))).toEqual({
      jsonrpc: '2.0',
      id: 'abc',
      result: { method: 'tools/list' },
    });
    await expect(up.call({ jsonrpc: '2.0', method: 'notify' })).resolves.toBeUndefined();
  });

  it('picks the matching response out of an SSE answer', async () => {
    const up = upstream<RpcUpstream>({ kind: 'jsonrpc', url: `${base}/rpc-sse` });
    const answers = await Promise.all([up.call(msg(1, 'a')), up.call(msg(1, 'b'))]);
    expect(answers).toEqual([
      { jsonrpc: '2.0', id: 1, result: { method: 'a' } },
      { jsonrpc: '2.0', id: 1, result: { method: 'b' } },
    ]);
  });

  it('times out a call with upstream_timeout', async () => {
    const up = upstream<RpcUpstream>({ kind: 'jsonrpc', url: `${base}/slow` });
    const err = await up.call(msg(1), { timeoutMs: 200 }).catch((e) => e);
    expect(err.kind).toBe('upstream_timeout');
  });
});

describe('jsonrpc upstream with protocol mcp (reference server, streamable HTTP)', () => {
  let port: number;
  let child: ChildProcess;
  let up: RpcUpstream;

  beforeAll(async () => {
    port = await freePort();
    child = await startEverythingHttp(port);
    up = upstream<RpcUpstream>({ kind: 'jsonrpc', url: `http://127.0.0.1:${port}/mcp`, protocol: 'mcp' });
    await up.ready(5000);
  });
  afterAll(() => stop(child));

  it('opens a session and lists and calls tools', async () => {
    const list = await up.call({ jsonrpc: '2.0', id: 'l', method: 'tools/list' });
    expect(list?.id).toBe('l');
    expect((list!.result as { tools: { name: string }[] }).tools.map((t) => t.name)).toContain('echo');
    const echo = await up.call({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'over http' } },
    });
    expect(echo).toMatchObject({ id: 3, result: { content: [{ text: 'Echo: over http' }] } });
  });

  it('keeps concurrent callers with the same id apart', async () => {
    const calls = Array.from({ length: 10 }, (_, i) =>
      up.call({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'echo', arguments: { message: `${i}` } },
      }),
    );
    const answers = await Promise.all(calls);
    answers.forEach((a, i) => {
      expect(a).toMatchObject({ id: 1, result: { content: [{ text: `Echo: ${i}` }] } });
    });
  });

  it('opens a new session when the server has forgotten the old one', async () => {
    await stop(child);
    child = await startEverythingHttp(port);
    const list = await up.call({ jsonrpc: '2.0', id: 'again', method: 'tools/list' });
    expect(list?.result).toHaveProperty('tools');
  });
});
