/**
 * How an HTTP upstream hands over its answers (runtime/upstreams/answer-handler.ts, undici's
 * dispatch with a handler of ours): a small answer whole (`whole`, no stream made), any other as
 * a stream with backpressure, cut short or abandoned the way a reader expects. Real undici pool,
 * real node:http and raw TCP servers on loopback.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { smallAnswerBytes } from '../../runtime/upstreams/answer-handler.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { HttpUpstream } from '../../runtime/upstreams/types.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler = (_req, res) => res.end();
let server: Server;
let upstream: HttpUpstream;

beforeAll(async () => {
  server = createServer((req, res) => handler(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  upstream = upstreamOf('answers', server.address() as AddressInfo);
});
afterAll(async () => {
  await upstream?.close();
  server?.closeAllConnections();
  server?.close();
});

/** An `http` upstream (a real undici pool) in front of a server listening at `address`. */
function upstreamOf(name: string, address: AddressInfo): HttpUpstream {
  return createUpstream(
    name,
    { kind: 'http', url: `http://127.0.0.1:${address.port}`, timeout_ms: 5000 },
    { logger: silentLogger, configDir: process.cwd() },
  ) as HttpUpstream;
}

const get = (method = 'GET') => upstream.forward({ method, path: '/', headers: {} });

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Writes `body` in `pieces` (their lengths), a loop turn apart, with a Content-Length unless `chunked`. */
function sendInPieces(res: ServerResponse, body: Buffer, type: string, pieces: number[], chunked: boolean): void {
  res.setHeader('content-type', type);
  if (!chunked) res.setHeader('content-length', body.length);
  let at = 0;
  const next = (i: number) => {
    if (at >= body.length) {
      res.end();
      return;
    }
    const n = Math.max(1, pieces[i % pieces.length] ?? body.length);
    res.write(body.subarray(at, at + n));
    at += n;
    setImmediate(() => next(i + 1));
  };
  next(0);
}

describe('an upstream answer', () => {
  it('small (by Content-Length) comes whole, and a stream of it, when asked for, reads the same bytes', async () => {
    const text = JSON.stringify({ ok: true, pad: 'x'.repeat(1000) });
    handler = (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.end(text);
    };
    const res = await get();
    expect(res.status).toBe(200);
    expect(res.whole?.toString()).toBe(text);
    expect(res.headers['content-type']).toBe('application/json');
    // Repeated headers as undici's own parser gives them.
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect((await readAll(res.body)).toString()).toBe(text);
  });

  it('large, or an event stream, or without a length, comes as a stream at its headers, before its end', async () => {
    for (const [type, length] of [
      ['application/octet-stream', smallAnswerBytes + 1],
      ['text/event-stream', 100],
      ['application/json', undefined],
    ] as const) {
      let finish: () => void = () => {};
      handler = (_req, res) => {
        res.setHeader('content-type', type);
        if (length !== undefined) res.setHeader('content-length', length);
        res.write('a');
        finish = () => res.end('b'.repeat((length ?? 2) - 1));
      };
      const res = await get();
      expect(res.whole, type).toBeUndefined();
      const read = readAll(res.body);
      finish();
      expect((await read).length).toBe(length ?? 2);
    }
  });

  it('a stream nobody reads holds the upstream back (backpressure), not 8 MB in memory', async () => {
    let written = 0;
    let stopped: () => void = () => {};
    const full = new Promise<void>((resolve) => {
      stopped = resolve;
    });
    handler = (_req, res) => {
      res.setHeader('content-type', 'application/octet-stream');
      const chunk = Buffer.alloc(64 * 1024, 1);
      const pump = () => {
        while (written < 8 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            stopped();
            return;
          }
        }
        res.end();
      };
      pump();
    };
    const res = await get();
    await full;
    await new Promise((r) => setTimeout(r, 100));
    // The kernel's socket buffers and the stream's high-water mark hold some; the rest waits.
    expect(written).toBeLessThan(8 * 1024 * 1024);
    expect(res.body.readableLength).toBeLessThanOrEqual(256 * 1024);
    expect((await readAll(res.body)).length).toBe(8 * 1024 * 1024);
  });

  it('a stream dropped before its end cuts the upstream request (the server sees its connection close)', async () => {
    let closed: () => void = () => {};
    const serverSawClose = new Promise<void>((resolve) => {
      closed = resolve;
    });
    handler = (req, res) => {
      res.setHeader('content-type', 'text/event-stream');
      res.write('data: 1\n\n');
      req.socket.once('close', closed);
    };
    const res = await get();
    res.body.destroy();
    await serverSawClose;
  });

  it('HEAD (whatever its Content-Length), 204 and 304 carry no body', async () => {
    for (const [method, status, length] of [
      ['HEAD', 200, 10],
      ['GET', 204, undefined],
      ['GET', 304, undefined],
    ] as const) {
      handler = (_req, res) => {
        res.statusCode = status;
        if (length) res.setHeader('content-length', length);
        res.end();
      };
      const res = await get(method);
      expect(res.status).toBe(status);
      expect(res.whole).toBeUndefined();
      expect((await readAll(res.body)).length).toBe(0);
    }
  });

  it('any size, type and chunking: the bytes as sent, whole exactly when small and not an event stream', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.integer({ min: 1, max: 2048 }),
          fc.integer({ min: smallAnswerBytes - 16, max: smallAnswerBytes + 16 }),
        ),
        fc.constantFrom('application/json', 'text/event-stream', 'text/plain'),
        fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 5 }),
        fc.boolean(),
        async (size, type, pieces, chunked) => {
          const body = Buffer.alloc(size);
          for (let i = 0; i < size; i++) body[i] = (i * 31 + size) & 0xff;
          handler = (_req, res) => sendInPieces(res, body, type, pieces, chunked);
          const res = await get();
          const small = !chunked && size <= smallAnswerBytes && type !== 'text/event-stream';
          expect(res.whole !== undefined).toBe(small);
          const got = res.whole ?? (await readAll(res.body));
          expect(got.equals(body)).toBe(true);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('an upstream answer cut short', () => {
  let tcp: ReturnType<typeof createTcpServer>;
  let cut: HttpUpstream;
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    // Headers and half the declared body, then a reset: a small answer cut after its headers.
    tcp = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"half":');
        setTimeout(() => socket.resetAndDestroy(), 20);
      });
    });
    tcp.listen(0, '127.0.0.1');
    await once(tcp, 'listening');
    cut = upstreamOf('cut', tcp.address() as AddressInfo);
  });
  afterAll(async () => {
    await cut?.close();
    for (const s of sockets) s.destroy();
    tcp?.close();
  });

  it('is handed over (its status and headers came) with a body that fails when read, never whole', async () => {
    const res = await cut.forward({ method: 'GET', path: '/', headers: {} });
    expect(res.status).toBe(200);
    expect(res.whole).toBeUndefined();
    await expect(readAll(res.body)).rejects.toThrow();
  });

  it('a reader that only drains the failing body sees it close; the process does not crash', async () => {
    const res = await cut.forward({ method: 'GET', path: '/', headers: {} });
    // Not events.once: it rejects on the 'error' the body emits before closing.
    const closed = new Promise((resolve) => res.body.once('close', resolve));
    res.body.resume();
    await closed;
    expect(res.body.destroyed).toBe(true);
  });
});
