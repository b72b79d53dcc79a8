/**
 * WebSocket routes: the runtime hands an upgrade request to the stage of its route that takes
 * upgrades, and the websocket-bridge relays each message through the service's own chat route
 * (auth and the chat stage of test/fixtures/websocket), as a real `ws` client sees it.
 */
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { until } from '../helpers/servers.ts';

const file = join(import.meta.dirname, '../fixtures/websocket/service.yaml');
const auth = { authorization: 'Bearer sk-test' };
interface Frame {
  object?: string;
  id?: string;
  choices?: Array<{ delta: { content: string } }>;
  done?: boolean;
  request_id?: string;
  error?: { message?: string; type?: string; code?: string | null };
}

/** A connected client that keeps every frame it receives, parsed, for `next()` to take in order. */
class Client {
  readonly frames: Frame[] = [];
  private wake: (() => void) | undefined;
  closed: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(String(data)));
      this.wake?.();
    });
    this.closed = once(ws, 'close').then(([code, reason]) => ({ code, reason: String(reason) }));
  }

  async next(timeoutMs = 3000): Promise<Frame> {
    const end = Date.now() + timeoutMs;
    while (this.frames.length === 0) {
      if (Date.now() > end) throw new Error('no frame in time');
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, 50);
      });
    }
    return this.frames.shift() as Frame;
  }

  /** Frames up to and including the one that ends an answer (`done` or `error`). */
  async answer(): Promise<Frame[]> {
    const out: Frame[] = [];
    for (;;) {
      const frame = await this.next();
      out.push(frame);
      if (frame.done || frame.error) return out;
    }
  }

  send(value: unknown): void {
    this.ws.send(typeof value === 'string' ? value : JSON.stringify(value));
  }
}

function connect(url: string, headers: Record<string, string> = auth): Promise<Client> {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/chat/stream`, { headers });
  return once(ws, 'open').then(() => new Client(ws));
}

/** What a client whose handshake is not accepted receives: the HTTP status and body. */
function refusedHandshake(
  url: string,
  path: string,
  options: WebSocket.ClientOptions = {},
): Promise<{ status: number; body: string }> {
  const ws = new WebSocket(`${url.replace('http', 'ws')}${path}`, options);
  return new Promise((resolve, reject) => {
    ws.on('open', () => reject(new Error('handshake accepted')));
    ws.on('error', () => {});
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
  });
}

const chat = (content: string) => ({ model: 'test', messages: [{ role: 'user', content }] });

describe('websocket-bridge in front of a streaming chat route', () => {
  let svc: StartedService;
  const logs: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n')) if (line) logs.push(JSON.parse(line));
        done();
      },
    });
    svc = await startService(file, { logger: pino({ level: 'info' }, sink) });
  });
  afterAll(() => svc?.close());

  it('relays the stream as chunk frames in order, then an end frame, and serves the next message', async () => {
    const ws = new WebSocket(`${svc.url.replace('http', 'ws')}/v1/chat/stream`, {
      headers: { ...auth, 'x-request-id': 'ws-1' },
    });
    const upgraded = once(ws, 'upgrade');
    const opened = once(ws, 'open');
    const [upgrade] = await upgraded;
    expect(upgrade.headers['x-request-id']).toBe('ws-1');
    await opened;
    const client = new Client(ws);

    client.send(chat('hello brave new world')); // no `stream`: the bridge forces it
    const first = await client.answer();
    expect(first.slice(0, -1).map((f) => f.choices?.[0].delta.content)).toEqual(['hello', ' brave', ' new', ' world']);
    for (const f of first.slice(0, -1)) expect(f).toMatchObject({ object: 'chat.completion.chunk', id: 'ws-1.1' });
    expect(first.at(-1)).toEqual({ done: true, request_id: 'ws-1.1' });

    client.send(chat('again'));
    const second = await client.answer();
    expect(second.map((f) => f.choices?.[0].delta.content ?? f)).toEqual([
      'again',
      { done: true, request_id: 'ws-1.2' },
    ]);
    ws.close();
    expect((await client.closed).code).toBe(1005);
  });

  it('answers a message that is not a JSON object with an error frame and stays open', async () => {
    const client = await connect(svc.url);
    client.send('{not json');
    expect(await client.answer()).toEqual([
      {
        error: expect.objectContaining({ type: 'invalid_request', message: expect.stringContaining('not valid JSON') }),
      },
    ]);
    client.send('[1, 2]');
    expect((await client.next()).error?.message).toMatch(/JSON object/);
    client.send(chat('still here'));
    expect((await client.answer()).at(-1)).toMatchObject({ done: true });
    client.ws.close();
  });

  it("relays the target route's refusal as one error frame and stays open", async () => {
    const client = await connect(svc.url);
    client.send(chat('something forbidden'));
    expect(await client.answer()).toEqual([
      { error: expect.objectContaining({ type: 'safety_violation', code: 'no-forbidden' }) },
    ]);
    client.send(chat('fine'));
    expect((await client.answer()).at(-1)).toMatchObject({ done: true });
    client.ws.close();
  });

  it('a cross-site page (foreign Origin) cannot open the socket: 403 at the handshake', async () => {
    const refused = await refusedHandshake(svc.url, '/v1/chat/stream', {
      headers: auth,
      origin: 'https://evil.example.com',
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('Origin');
    // The same handshake from a loopback page is accepted.
    const ws = new WebSocket(`${svc.url.replace('http', 'ws')}/v1/chat/stream`, {
      headers: auth,
      origin: 'http://localhost:3000',
    });
    await once(ws, 'open');
    ws.close();
  });

  it('a rejected token gets the 401 body as a frame, then the socket closes with 1008', async () => {
    const client = await connect(svc.url, { authorization: 'Bearer wrong' });
    client.send(chat('hi'));
    expect(await client.next()).toEqual({ error: expect.objectContaining({ type: 'authentication_error' }) });
    expect((await client.closed).code).toBe(1008);
  });

  it('answers messages one at a time and refuses more than max_queued waiting', async () => {
    const client = await connect(svc.url);
    for (const word of ['slow a', 'b', 'c', 'd']) client.send(chat(word));
    // One in progress and two waiting (max_queued: 2): the fourth is refused at once.
    expect((await client.next()).error).toMatchObject({ code: 'too_many_pending' });
    const contents: string[] = [];
    for (let i = 0; i < 3; i++)
      for (const f of await client.answer()) if (f.choices) contents.push(f.choices[0].delta.content);
    expect(contents).toEqual(['slow', ' a', 'b', 'c']);
    client.ws.close();
  });

  it('cancels the request being answered when the client leaves', async () => {
    const aborted = async () =>
      (await svc.runtime.metrics.registry.getSingleMetric('test_chat_aborted_total')?.get())?.values[0]?.value ?? 0;
    const before = await aborted();
    const client = await connect(svc.url);
    client.send(chat('slow slow slow slow slow slow'));
    await client.next();
    client.ws.close();
    await until(async () => (await aborted()) === before + 1, 3000);
  });

  it('closes with 1009 on a message over limits.body_bytes', async () => {
    const client = await connect(svc.url);
    client.send(chat('x'.repeat(5000)));
    expect((await client.closed).code).toBe(1009);
  });

  it('counts an open socket as in flight until it closes, and logs it', async () => {
    await until(() => svc.runtime.graph.inflight === 0, 2000); // the sockets of the tests before
    const client = await connect(svc.url, { ...auth, 'x-request-id': 'ws-log' });
    expect(svc.runtime.graph.inflight).toBe(1);
    client.ws.close();
    await client.closed;
    await until(() => svc.runtime.graph.inflight === 0, 2000);
    await until(() => logs.some((l) => l.request_id === 'ws-log' && l.msg === 'upgraded connection closed'), 2000);
    expect(logs.find((l) => l.request_id === 'ws-log' && l.msg === 'request')).toMatchObject({
      status: 101,
      route: 'GET /v1/chat/stream',
      upgrade: 'websocket',
    });
  });

  it('answers a plain GET on the WebSocket route with 426 Upgrade Required', async () => {
    const res = await fetch(`${svc.url}/v1/chat/stream`);
    expect(res.status).toBe(426);
    expect(res.headers.get('upgrade')).toBe('websocket');
    expect((await res.json()).error).toMatchObject({ code: 'upgrade_required' });
  });

  it('refuses a malformed handshake with 400 in the route dialect', async () => {
    const { status, body } = await rawGet(svc.url, '/v1/chat/stream', { connection: 'Upgrade', upgrade: 'websocket' });
    expect(status).toBe(400);
    expect(JSON.parse(body).error).toMatchObject({ type: 'invalid_request', message: /Sec-WebSocket-Key/ });
  });

  it('serves an upgrade request elsewhere as a plain request, ignoring Upgrade', async () => {
    expect((await refusedHandshake(svc.url, '/health')).status).toBe(200);
    expect((await refusedHandshake(svc.url, '/nope')).status).toBe(404);
    const h2c = await rawGet(svc.url, '/health', { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c' });
    expect(h2c.status).toBe(200);
    expect(JSON.parse(h2c.body)).toMatchObject({ status: 'healthy' });
  });
});

describe('WebSocket connections across a reload and a shutdown', () => {
  it('a reload keeps open sockets working until the drain timeout, then closes them with 1001', async () => {
    const svc = await startService(file);
    try {
      const client = await connect(svc.url);
      const outcome = await svc.runtime.reload();
      expect(outcome.ok).toBe(true);
      client.send(chat('after reload'));
      expect((await client.answer()).at(-1)).toMatchObject({ done: true });
      // drain_timeout_ms is 1000: the old graph is then retired and its sockets closed.
      expect((await client.closed).code).toBe(1001);
      const fresh = await connect(svc.url);
      fresh.send(chat('new graph'));
      expect((await fresh.answer()).at(-1)).toMatchObject({ done: true });
      fresh.ws.close();
    } finally {
      await svc.close();
    }
  });

  it('shutdown closes open sockets with 1001 after the drain timeout', async () => {
    const svc = await startService(file);
    const client = await connect(svc.url);
    const started = Date.now();
    await svc.close();
    expect((await client.closed).code).toBe(1001);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});

function rawGet(url: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { headers }, (res) => {
      let body = '';
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('upgrade', () => reject(new Error('upgraded')));
    req.on('error', reject);
    req.end();
  });
}
