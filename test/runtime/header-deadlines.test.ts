/**
 * Deadlines are judged after the event loop has read its sockets
 * (runtime/server/header-deadlines.ts, the connection tracker's body sweep): a request, or the
 * rest of a body, that arrived while the loop was stalled for longer than the deadline is
 * answered, not refused 408 as a slowloris nor cut as a stalled upload; a client that never
 * completes its headers is still closed with 408.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { ConnectionTracker } from '../../runtime/server/connections.ts';
import { createListener, type Server, startListener } from '../../runtime/server/listener.ts';

const run = promisify(execFile);
const clients = join(import.meta.dirname, 'fixtures/stall-clients.mjs');
const DEADLINE_MS = 1000;
const STALL_MS = 2500;

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  if (server?.listening) await new Promise((r) => server?.close(r));
  server = undefined;
});

/**
 * A listener with a 1 s deadline (on headers; with `bodyIdle`, on a body's next byte through the
 * connection tracker) whose `/block` keeps the loop busy for 2.5 s.
 */
async function stallingListener(
  bodyIdle: boolean,
): Promise<{ port: number; stallStarts: number[]; stallEnds: number[] }> {
  const stallStarts: number[] = [];
  const stallEnds: number[] = [];
  server = createListener(
    (req, res) => {
      if (req.url === '/block') {
        stallStarts.push(performance.timeOrigin + performance.now());
        const until = performance.now() + STALL_MS;
        while (performance.now() < until); // the stall: a long collection, a starved process
        stallEnds.push(performance.timeOrigin + performance.now());
      }
      req.resume();
      req.on('end', () => res.end('ok'));
    },
    { keepAliveMs: 5000, headersMs: bodyIdle ? 60_000 : DEADLINE_MS },
  );
  if (bodyIdle) {
    const limits = { max: 100, perClient: 100, highWater: 1, slowHeaderMs: 5000, headersMs: 60_000 };
    new ConnectionTracker({ ...limits, bodyIdleMs: DEADLINE_MS }).attach(server, false);
  }
  return { port: await startListener(server, '127.0.0.1', 0), stallStarts, stallEnds };
}

/**
 * A's status line when its last bytes were written during the stall. The clients run in their own
 * process, so they write while this loop is busy; a run where the (loaded) client process wrote
 * them before the stall began (its sleeps stretched past the deadline: a 408 or a cut is then
 * right) or after it ended tests nothing: it is run again, up to five times.
 */
async function duringStall(mode: 'headers' | 'body'): Promise<string> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const { port, stallStarts, stallEnds } = await stallingListener(mode === 'body');
    const { stdout } = await run(process.execPath, [clients, String(port), mode]);
    const { writtenAt, status } = JSON.parse(stdout) as { writtenAt: number; status: string };
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    expect(stallEnds).toHaveLength(1);
    if (writtenAt > (stallStarts[0] as number) && writtenAt < (stallEnds[0] as number)) return status;
  }
  throw new Error('the client process never wrote during the stall');
}

describe('header deadlines after a stalled event loop', () => {
  it('a request that arrived during the stall is answered, though its connection is older than the deadline', async () => {
    expect(await duringStall('headers')).toBe('HTTP/1.1 200 OK');
  }, 30_000);

  it('the rest of a body that arrived during the stall is read, not cut as a stalled upload', async () => {
    expect(await duringStall('body')).toBe('HTTP/1.1 200 OK');
  }, 30_000);

  it('a connection that never completes its headers is still closed with 408', async () => {
    server = createListener((_req, res) => res.end('ok'), { keepAliveMs: 5000, headersMs: DEADLINE_MS });
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
