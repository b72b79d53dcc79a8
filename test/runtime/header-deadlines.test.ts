/**
 * Header deadlines are checked after the event loop has read its sockets
 * (runtime/server/header-deadlines.ts): a request that arrived while the loop was stalled for
 * longer than the header deadline is answered, not refused 408 as a slowloris; a client that
 * never completes its headers is still closed with 408.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createListener, type Server, startListener } from '../../runtime/server/listener.ts';

const run = promisify(execFile);
const clients = join(import.meta.dirname, 'fixtures/stall-clients.mjs');
const HEADERS_MS = 1000;
const STALL_MS = 2500;

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  if (server?.listening) await new Promise((r) => server?.close(r));
  server = undefined;
});

/** A listener with a 1 s header deadline whose `/block` keeps the loop busy for 2.5 s. */
async function stallingListener(): Promise<{ port: number; stallEnds: number[] }> {
  const stallEnds: number[] = [];
  server = createListener(
    (req, res) => {
      if (req.url === '/block') {
        const until = performance.now() + STALL_MS;
        while (performance.now() < until); // the stall: a long collection, a starved process
        stallEnds.push(performance.timeOrigin + performance.now());
      }
      res.end('ok');
    },
    { keepAliveMs: 5000, headersMs: HEADERS_MS },
  );
  return { port: await startListener(server, '127.0.0.1', 0), stallEnds };
}

describe('header deadlines after a stalled event loop', () => {
  it('a request that arrived during the stall is answered, though its connection is older than the deadline', async () => {
    // The clients run in their own process, so they write while this loop is busy. A run where
    // the (loaded) client process wrote A's request only after the stall ended tests nothing:
    // it is run again, up to three times.
    let tested = 0;
    for (let attempt = 0; attempt < 3 && tested === 0; attempt++) {
      const { port, stallEnds } = await stallingListener();
      const { stdout } = await run(process.execPath, [clients, String(port)]);
      const { writtenAt, status } = JSON.parse(stdout) as { writtenAt: number; status: string };
      const stallEnd = stallEnds[0];
      expect(stallEnd).toBeDefined();
      if (writtenAt < (stallEnd as number)) {
        tested++;
        expect(status).toBe('HTTP/1.1 200 OK');
      }
      server?.closeAllConnections();
      await new Promise((r) => server?.close(r));
    }
    expect(tested, 'the client process never wrote during the stall').toBe(1);
  }, 30_000);

  it('a connection that never completes its headers is still closed with 408', async () => {
    server = createListener((_req, res) => res.end('ok'), { keepAliveMs: 5000, headersMs: HEADERS_MS });
    const port = await startListener(server, '127.0.0.1', 0);
    const socket = connect({ port, host: '127.0.0.1' });
    let answer = '';
    socket.on('data', (d) => (answer += d));
    await once(socket, 'connect');
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n'); // never the blank line
    await once(socket, 'close');
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
  }, 30_000);
});
