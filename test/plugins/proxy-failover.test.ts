/**
 * The proxy's provider failover on its own (no tenants, plain `http` upstreams): a list of
 * upstreams given as the stage's `upstream`, tried in turn; which served in ctx.state.providers.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { retryAfterMs, tryOrder } from '../../plugins/proxy/failover.ts';
import proxyPlugin from '../../plugins/proxy/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import type { StageInstance } from '../../runtime/plugin.ts';
import type { GatewayContext, Stage } from '../../runtime/state.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { HttpUpstream, Upstream } from '../../runtime/upstreams/types.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const closers: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/**
 * An upstream answering `status` with a body naming it; counts its requests and the connections
 * they came on.
 * `chunked`: the body in two writes without a Content-Length (it streams to the gateway).
 */
async function backend(
  name: string,
  status: () => number,
  chunked = false,
): Promise<{ url: string; hits: () => number; connections: () => number }> {
  let hits = 0;
  const sockets = new Set<unknown>();
  const server: Server = createServer((req, res) => {
    hits++;
    sockets.add(req.socket);
    req.resume();
    req.on('end', () => {
      res.writeHead(status(), { 'content-type': 'application/json' });
      if (!chunked) return res.end(JSON.stringify({ from: name }));
      res.write(`{"from":`);
      setTimeout(() => res.end(`"${name}"}`), 5);
    });
  });
  const url = await listenLocal(server);
  closers.push(() => closeNow(server));
  return { url, hits: () => hits, connections: () => sockets.size };
}

async function route(names: Record<string, string>, options: Record<string, unknown>) {
  const upstreams: Record<string, Upstream> = {};
  for (const [name, url] of Object.entries(names)) {
    const u = createUpstream(name, { kind: 'http', url }, { logger: silentLogger, configDir: '.' });
    closers.push(() => u.close());
    upstreams[name] = u;
  }
  const created = await proxyPlugin.create(
    { forward_headers: [], via: 'auto', cooldown_ms: 30000, ...options } as never,
    createTestEnv({ upstreams }),
  );
  let last: GatewayContext | undefined;
  const record: Stage = async (ctx, next) => {
    last = ctx;
    await next();
  };
  const server = await serveStages([record, (created as StageInstance).handle]);
  closers.push(server.close);
  return { url: server.url, last: () => last, upstreams };
}

describe('proxy: a list of upstreams', () => {
  it('moves on from a 503 to the next, says which served, and tries the failed one last for a while', async () => {
    let firstStatus = 503;
    const a = await backend('a', () => firstStatus);
    const b = await backend('b', () => 200);
    const r = await route({ a: a.url, b: b.url }, { upstream: ['a', 'b'] });

    const res = await fetch(`${r.url}/x`, { method: 'POST', body: '{"q":1}' });
    expect(await res.json()).toEqual({ from: 'b' });
    expect(r.last()?.state.providers).toEqual({
      served: 'b',
      failed: [{ upstream: 'a', reason: 'status', status: 503 }],
    });

    // `a` is cooling down: `b` is asked first, `a` not at all.
    firstStatus = 200;
    const again = await fetch(`${r.url}/x`, { method: 'POST', body: '{"q":2}' });
    expect(await again.json()).toEqual({ from: 'b' });
    expect(a.hits()).toBe(1);
    expect(r.last()?.state.providers).toEqual({ served: 'b', failed: [] });
  });

  it('relays the serving stream whole, its first bytes included (held while the stream was checked for life)', async () => {
    const a = await backend('a', () => 502);
    let hits = 0;
    const sse = createServer((req, res) => {
      hits++;
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: one\n\n');
      setTimeout(() => res.end('data: two\n\ndata: [DONE]\n\n'), 20);
    });
    const b = await listenLocal(sse);
    closers.push(() => closeNow(sse));
    const r = await route({ a: a.url, b }, { upstream: ['a', 'b'] });
    const res = await fetch(`${r.url}/x`);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(await res.text()).toBe('data: one\n\ndata: two\n\ndata: [DONE]\n\n');
    expect(hits).toBe(1);
  });

  it('cooldown_ms: 0 keeps the list order; a 4xx other than 429 is an answer, not a failure', async () => {
    const a = await backend('a', () => 404);
    const b = await backend('b', () => 200);
    const r = await route({ a: a.url, b: b.url }, { upstream: ['a', 'b'], cooldown_ms: 0 });
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${r.url}/x`);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ from: 'a' });
    }
    expect(b.hits()).toBe(0);
  });

  it('a failed answer that streams is read to its end and dropped: the next request reuses its connection', async () => {
    const a = await backend('a', () => 503, true);
    const b = await backend('b', () => 200);
    const r = await route({ a: a.url, b: b.url }, { upstream: ['a', 'b'], cooldown_ms: 0 });
    for (let n = 0; n < 3; n++) {
      const res = await fetch(`${r.url}/x`, { method: 'POST', body: `{"q":${n}}` });
      expect(await res.json()).toEqual({ from: 'b' });
      // Drained in the background: let it finish before the next request asks `a` again.
      await new Promise((done) => setTimeout(done, 30));
    }
    expect(a.hits()).toBe(3);
    expect(a.connections()).toBe(1);
  });

  it('a single upstream answers as before: its 503 goes to the client', async () => {
    const a = await backend('a', () => 503);
    const r = await route({ a: a.url }, { upstream: 'a' });
    const res = await fetch(`${r.url}/x`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ from: 'a' });
    expect(r.last()?.state.providers).toEqual({ served: 'a', failed: [] });
  });
});

describe('failover helpers', () => {
  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs('soon')).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });

  it('keeps the list as it is when no upstream is demoted', () => {
    const fake = (name: string, connected: boolean, error?: string) =>
      ({ name, health: () => ({ connected, error }) }) as unknown as HttpUpstream;
    const list = [fake('a', true), fake('b', false), fake('c', true)];
    // `b` was never probed (no error): it keeps its place.
    expect(tryOrder(list)).toBe(list);
    const down = [fake('a', false, 'connection refused'), fake('b', true), fake('c', true)];
    expect(tryOrder(down).map((u) => u.name)).toEqual(['b', 'c', 'a']);
  });
});
