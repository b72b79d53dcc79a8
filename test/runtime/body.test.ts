/**
 * readBody / readJson: a body already in whole (sent with its headers) is taken from the
 * request's buffer without raw-body, also when it is read before the parser has pushed it (one
 * microtask later); one still arriving goes through raw-body. Both give the same
 * bytes, end the request (keep-alive goes on) and keep the limits.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readBody, readJson, withJson } from '../../runtime/body.ts';
import type { GatewayContext } from '../../runtime/state.ts';
import { countListenersAdded } from '../helpers/listeners.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

/** The fields of a context readBody and readJson use. */
function contextOf(req: IncomingMessage, bodyBytes: number): GatewayContext {
  return {
    req,
    state: { limits: { bodyBytes, jsonDepth: 64 } },
    get: (name: string) => {
      const v = req.headers[name.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : (v ?? '');
    },
  } as unknown as GatewayContext;
}

type Read = (ctx: GatewayContext) => Promise<unknown>;

let server: ReturnType<typeof createServer> | undefined;
afterEach(async () => {
  if (server) closeNow(server);
  server = undefined;
});

/**
 * A server answering what `read` made of each request's body, whether the request then ended,
 * and how many 'data' listeners the read put on the request (raw-body's; none when the body was
 * taken from the request's buffer). `at`: when the body is read: a few microtasks after the
 * headers came, or at once in the request's callback (as a pipeline whose first stages are
 * synchronous does), while the parser is still inside the chunk that carried the headers.
 */
async function serve(read: Read, bodyBytes = 1024, at: 'later' | 'at once' = 'later'): Promise<number> {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const listened = countListenersAdded(req, 'data');
    const started = at === 'at once' ? read(contextOf(req, bodyBytes)) : Promise.resolve();
    started
      .then((value) => (at === 'at once' ? value : read(contextOf(req, bodyBytes))))
      .then(
        (value) => {
          const answer = (ended: boolean) => {
            const text = JSON.stringify({
              value: Buffer.isBuffer(value) ? value.toString() : value,
              ended,
              listened: listened(),
            });
            res.setHeader('content-length', Buffer.byteLength(text));
            res.end(text);
          };
          if (req.readableEnded) answer(true);
          else req.once('end', () => answer(true));
        },
        (err: Error & { kind?: string }) => {
          res.statusCode = 400;
          res.end(JSON.stringify({ error: err.kind ?? err.message }));
        },
      );
  });
  return Number(new URL(await listenLocal(server)).port);
}

/** Sends raw requests on one connection and collects the answers' bodies (each `Content-Length` long). */
async function exchange(port: number, parts: Array<string | number>, answers: number): Promise<string[]> {
  const socket: Socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let received = '';
  socket.on('data', (d) => {
    received += d.toString();
  });
  for (const part of parts) {
    if (typeof part === 'number') await new Promise((r) => setTimeout(r, part));
    else socket.write(part);
  }
  const bodies = (): string[] =>
    received
      .split('HTTP/1.1 ')
      .slice(1)
      .map((a) => {
        const length = Number(/content-length: (\d+)/i.exec(a)?.[1] ?? 0);
        const start = a.indexOf('\r\n\r\n') + 4;
        return a.slice(start, start + length);
      });
  for (let i = 0; i < 200 && bodies().filter((b) => b.endsWith('}')).length < answers; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  socket.destroy();
  return bodies();
}

const post = (body: string) =>
  `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

describe('request body', () => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'échø' } });

  it('reads a body sent with its headers, and the next request on the connection too', async () => {
    const port = await serve(readBody);
    const answers = await exchange(port, [post(body), 20, post(body)], 2);
    expect(answers.map((a) => JSON.parse(a))).toEqual([
      { value: body, ended: true, listened: 0 },
      { value: body, ended: true, listened: 0 },
    ]);
  });

  it('takes a body sent with its headers from the buffer when it is read at once, before the parser has pushed it', async () => {
    for (const read of [readBody, readJson]) {
      const port = await serve(read, 1024, 'at once');
      const answers = await exchange(port, [post(body), 20, post(body)], 2);
      const value = read === readBody ? body : JSON.parse(body);
      expect(answers.map((a) => JSON.parse(a))).toEqual([
        { value, ended: true, listened: 0 },
        { value, ended: true, listened: 0 },
      ]);
      if (server) closeNow(server);
    }
  });

  it('reads a body that arrives after its headers, in parts', async () => {
    const port = await serve(readJson);
    const whole = post(body);
    const cut = whole.indexOf('\r\n\r\n') + 10;
    const answers = await exchange(port, [whole.slice(0, cut), 30, whole.slice(cut)], 1);
    expect(answers.map((a) => JSON.parse(a))).toEqual([{ value: JSON.parse(body), ended: true, listened: 1 }]);
  });

  it('reads a body that arrives after its headers when read at once too', async () => {
    const port = await serve(readJson, 1024, 'at once');
    const whole = post(body);
    const cut = whole.indexOf('\r\n\r\n') + 10;
    const answers = await exchange(port, [whole.slice(0, cut), 30, whole.slice(cut)], 1);
    expect(answers.map((a) => JSON.parse(a))).toEqual([{ value: JSON.parse(body), ended: true, listened: 1 }]);
  });

  it('parses a body sent with its headers as JSON', async () => {
    const port = await serve(readJson);
    const answers = await exchange(port, [post(body)], 1);
    expect(answers.map((a) => JSON.parse(a))).toEqual([{ value: JSON.parse(body), ended: true, listened: 0 }]);
  });

  it('refuses a declared length over the limit, whether or not the body is in', async () => {
    const port = await serve(readBody, 16);
    const answers = await exchange(port, [post(body)], 1);
    expect(answers.map((a) => JSON.parse(a))).toEqual([{ error: 'payload_too_large' }]);
  });

  it("withJson: the body once read when it arrives in parts (a promise), with readJson's checks", async () => {
    const port = await serve((ctx) => Promise.resolve(withJson(ctx, (value) => ({ used: value }))));
    const whole = post(body);
    const cut = whole.indexOf('\r\n\r\n') + 10;
    const answers = await exchange(port, [whole.slice(0, cut), 30, whole.slice(cut)], 1);
    expect(answers.map((a) => JSON.parse(a))).toEqual([
      { value: { used: JSON.parse(body) }, ended: true, listened: 1 },
    ]);
  });

  it('withJson: a body at hand is given at once, and a refused one thrown at once, not rejected', () => {
    const ctx = (type: string, json?: unknown) =>
      ({
        state: { limits: { bodyBytes: 1024, jsonDepth: 64 }, json },
        get: (name: string) => (name.toLowerCase() === 'content-type' ? type : ''),
      }) as unknown as GatewayContext;
    expect(withJson(ctx('application/json', { a: 1 }), (value) => ({ used: value }))).toEqual({ used: { a: 1 } });
    expect(() => withJson(ctx('text/plain'), (value) => value)).toThrow(/Content-Type must be application\/json/);
  });
});
