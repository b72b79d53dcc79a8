/**
 * How long a stop keeps an idle keep-alive connection open for a request its client may be
 * sending (runtime/server/connections.ts `stopLingerMs`, `closeIdleAtStop`, `holdsStop`): real
 * sockets on a real HTTP server, the tracker's clock given by the test, so nothing depends on how
 * fast this machine is.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ConnectionRecord,
  ConnectionTracker,
  stopLingerMaxMs,
  stopLingerMinMs,
  stopLingerMs,
} from '../../runtime/server/connections.ts';
import { RawConnection } from '../helpers/raw-http.ts';

const freshMs = 1000;

describe('stopLingerMs', () => {
  it('is four times the client’s longest pause, from 100 ms to 1 s', () => {
    expect(stopLingerMs(0)).toBe(stopLingerMinMs);
    expect(stopLingerMs(10)).toBe(stopLingerMinMs);
    expect(stopLingerMs(50)).toBe(200);
    expect(stopLingerMs(200)).toBe(800);
    expect(stopLingerMs(400)).toBe(stopLingerMaxMs);
    expect(stopLingerMs(60_000)).toBe(stopLingerMaxMs);
  });
});

describe('a stop’s sweep of idle connections', () => {
  let server: Server | undefined;
  const clients: RawConnection[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  /** A server whose tracker reads the clock `clock.now` (the test moves it). */
  async function tracked(clock: { now: number }) {
    const tracker = new ConnectionTracker({
      max: 100,
      perClient: 100,
      highWater: 1,
      slowHeaderMs: 5000,
      bodyIdleMs: 60_000,
      headersMs: 60_000,
    });
    server = createServer((req, res) => {
      const record = tracker.requestStarted(req.socket, clock.now) as ConnectionRecord;
      res.once('close', () => tracker.answered(record, req.socket, clock.now));
      req.resume();
      req.on('end', () => res.end('{}'));
    });
    tracker.attach(server, false);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    const open = async () => {
      const c = await RawConnection.open(port);
      clients.push(c);
      return c;
    };
    /** Resolves once the server saw every answer done (its 'close'). */
    const settle = () => until(() => tracker.snapshot().clients.every((c) => c.in_flight === 0));
    return { tracker, open, settle };
  }

  /** Gives the server's event loop a few turns (a close it was told to make happens meanwhile). */
  const turns = () => new Promise((r) => setTimeout(r, 20));

  it('keeps a connection whose client paused 250 ms between requests open 1 s after its answer, then closes it', async () => {
    const clock = { now: 10_000 };
    const { tracker, open, settle } = await tracked(clock);
    const conn = await open();
    await conn.post('/', {});
    await settle();
    clock.now += 250; // the client's pause before its next request
    await conn.post('/', {});
    await settle();
    const answeredAt = clock.now;
    const stoppedAt = answeredAt + 5;

    tracker.closeIdleAtStop(stoppedAt, freshMs, answeredAt + 500);
    expect(tracker.holdsStop(stoppedAt, freshMs, answeredAt + 500)).toBe(true);
    await turns();
    expect(conn.closed).toBeUndefined();
    // A request sent within the linger is answered (the caller says Connection: close).
    expect((await conn.post('/', {})).status).toBe(200);
    await settle();

    tracker.closeIdleAtStop(stoppedAt, freshMs, answeredAt + 999);
    await turns();
    expect(conn.closed).toBeUndefined();
    tracker.closeIdleAtStop(stoppedAt, freshMs, answeredAt + stopLingerMaxMs);
    expect(tracker.holdsStop(stoppedAt, freshMs, answeredAt + stopLingerMaxMs)).toBe(false);
    await until(() => conn.closed !== undefined);
  });

  it('gives a connection with one answer the pace other clients showed lately', async () => {
    const clock = { now: 10_000 };
    const { tracker, open, settle } = await tracked(clock);
    const paced = await open();
    await paced.post('/', {});
    await settle();
    clock.now += 250;
    await paced.post('/', {}); // a client that paused 250 ms
    await settle();
    const fresh = await open();
    await fresh.post('/', {}); // one answer: no pace of its own
    await settle();
    const answeredAt = clock.now;
    tracker.closeIdleAtStop(answeredAt, freshMs, answeredAt + 500);
    await turns();
    expect(fresh.closed).toBeUndefined();
    expect(tracker.recentGapMs(answeredAt)).toBe(250);
    tracker.closeIdleAtStop(answeredAt, freshMs, answeredAt + stopLingerMaxMs);
    await until(() => fresh.closed !== undefined && paced.closed !== undefined);
    // Twenty seconds without a gap: the pace is forgotten.
    expect(tracker.recentGapMs(answeredAt + 20_000)).toBe(0);
  });

  it('closes a connection whose client never paused 100 ms after the stop began, not before', async () => {
    const clock = { now: 10_000 };
    const { tracker, open, settle } = await tracked(clock);
    const conn = await open();
    await conn.post('/', {});
    await conn.post('/', {});
    await settle();
    const stoppedAt = clock.now + 60_000; // idle for a minute when the stop begins
    tracker.closeIdleAtStop(stoppedAt, freshMs, stoppedAt + stopLingerMinMs - 1);
    await turns();
    expect(conn.closed).toBeUndefined();
    expect(tracker.holdsStop(stoppedAt, freshMs, stoppedAt + stopLingerMinMs - 1)).toBe(true);
    tracker.closeIdleAtStop(stoppedAt, freshMs, stoppedAt + stopLingerMinMs);
    await until(() => conn.closed !== undefined);
  });

  it('never closes a connection on which a next request is arriving, whatever the time', async () => {
    const clock = { now: 10_000 };
    const { tracker, open, settle } = await tracked(clock);
    const conn = await open();
    await conn.post('/', {});
    await settle();
    // Half a request: its headers are still coming.
    (conn as unknown as { socket: import('node:net').Socket }).socket.write('POST / HTTP/1.1\r\nHost: x\r\n');
    const far = clock.now + 3_600_000;
    // Held once the server read those bytes, however late; then never closed by the sweep.
    await until(() => tracker.holdsStop(clock.now, freshMs, far));
    tracker.closeIdleAtStop(clock.now, freshMs, far);
    await turns();
    expect(conn.closed).toBeUndefined();
  });

  it('gives a connection not used yet freshMs for its first request', async () => {
    const clock = { now: 10_000 };
    const { tracker, open } = await tracked(clock);
    const conn = await open();
    await until(() => tracker.snapshot().active === 1);
    const connectedAt = Date.parse(tracker.snapshot().clients[0]?.connected_at ?? '');
    const stoppedAt = connectedAt + 10;
    tracker.closeIdleAtStop(stoppedAt, freshMs, connectedAt + freshMs - 1);
    await turns();
    expect(conn.closed).toBeUndefined();
    expect(tracker.holdsStop(stoppedAt, freshMs, connectedAt + freshMs - 1)).toBe(true);
    tracker.closeIdleAtStop(stoppedAt, freshMs, connectedAt + freshMs);
    await until(() => conn.closed !== undefined);
  });
});

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
}
