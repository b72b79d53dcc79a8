/**
 * Connection fairness on the main listener (issue 16 item 2, issue 29 item 3): one client at its
 * limit (slow headers, idle keep-alives, WebSocket upgrades) does not lock another client out, and
 * the per-client share acts only near max_connections (from connections_high_water of it), with
 * an answered 503 and Retry-After, not a reset. The attacker
 * connects from 127.0.0.2, the other client from 127.0.0.1 (both loopback, distinct addresses).
 * Limits are lowered in the config so that few sockets are needed. Every refusal and every
 * connection closed to protect the others is counted on /metrics
 * (`switchyard_connections_refused_total{reason}`, `switchyard_connections_closed_total{reason}`).
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { sample } from '../helpers/prometheus.ts';
import { writeServiceFile } from '../helpers/services.ts';

const attacker = '127.0.0.2';
const key = 'sk-fair';
const headerTimeoutMs = 1000;
const bodyIdleMs = 1000;
const wsIdleMs = 1500;

const yaml = `service: fairness
version: 0.0.1
listen: { port: 0 }
metrics: { port: 0 }
dialect: openai
plugins: [${JSON.stringify(join(import.meta.dirname, '../fixtures/websocket/chat-stages.ts'))}]
limits:
  max_connections: 32
  max_connections_per_client: 8
  header_timeout_ms: ${headerTimeoutMs}
  body_idle_timeout_ms: ${bodyIdleMs}
  max_upgraded_connections: 4
  drain_timeout_ms: 200
routes:
  - match: { method: POST, path: /v1/chat/completions }
    pipeline:
      - auth: { tokens: [{ name: alice, token: ${key} }] }
      - test-chat: {}
  - match: { method: POST, path: /v1/chat/pauses }
    pipeline: [{ test-chat: { chunk_delay_ms: 1300 } }]
  - match: { method: GET, path: /v1/chat/stream }
    pipeline:
      - auth: { tokens: [{ name: alice, token: ${key} }] }
      - websocket-bridge: { target: /v1/chat/completions, idle_timeout_ms: ${wsIdleMs} }
  - match: { method: GET, path: /health }
    pipeline: [{ respond: { body: { status: ok } } }]
`;

/** One request on a fresh connection from 127.0.0.1; resolves to its status and body. */
function fetchFrom(
  url: string,
  path: string,
  o: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method: o.method ?? 'GET', agent: false, headers: o.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

/** A raw TCP connection from `localAddress`, with when it opened and closed. */
async function rawSocket(
  port: number,
  localAddress = attacker,
): Promise<{ socket: Socket; closedAfterMs: Promise<number> }> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  socket.on('error', () => {});
  socket.resume(); // read and drop answers (a 408)
  const opened = Date.now();
  // Not events.once: it rejects on the 'error' (a reset) that comes before 'close'.
  const closedAfterMs = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  // A refused connection may be reset before 'connect' is seen: wait for either.
  await Promise.race([once(socket, 'connect').catch(() => undefined), closedAfterMs]);
  return { socket, closedAfterMs };
}

/**
 * Sends `request` on `socket` and reads one answer: its status, headers and body (by
 * Content-Length, else until the connection closes).
 */
function exchange(
  socket: Socket,
  request: string,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const done = () => {
      socket.off('data', onData);
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no answer: ${JSON.stringify(text)}`));
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4) });
    };
    const onData = (d: Buffer) => {
      text += d.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
      if (end >= 0 && length && text.length >= end + 4 + Number(length[1])) done();
    };
    socket.on('data', onData);
    socket.once('close', () => (text ? done() : reject(new Error('closed without an answer'))));
    socket.write(request);
  });
}

/** The service's /metrics text. */
async function scrape(svc: StartedService): Promise<string> {
  return (await fetch(`${svc.metricsUrl}/metrics`)).text();
}

/** `switchyard_connections_<kind>_total{reason}` in an exposition (0 when absent). */
function counted(text: string, kind: 'refused' | 'closed', reason: string): number {
  return sample(text, `switchyard_connections_${kind}_total{reason="${reason}"`) ?? 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const portOf = (url: string) => Number(new URL(url).port);

describe('connection fairness on the main listener', () => {
  let svc: StartedService;
  let port: number;

  beforeAll(async () => {
    svc = await startService(writeServiceFile(yaml));
    port = portOf(svc.url);
  });
  afterAll(() => svc?.close());

  it('slowloris below the high-water mark: every connection held (no share applies), each cut after the header timeout, others served meanwhile; a long answer with silent gaps is not cut', async () => {
    // A streamed answer whose events come 1.3 s apart: longer than both the header and body bounds.
    const started = Date.now();
    const longAnswer = fetchFrom(svc.url, '/v1/chat/pauses', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'one two three' }] }),
    });

    const metricsBefore = await scrape(svc);
    const attempts = 12; // more than max_connections_per_client (8), under the high-water mark (24 of 32)
    const sockets = await Promise.all(Array.from({ length: attempts }, () => rawSocket(port)));
    const trickle = setInterval(() => {
      for (const { socket } of sockets) if (!socket.destroyed) socket.write('X-Slow: 1\r\n');
    }, 200);
    for (const { socket } of sockets) socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n');
    try {
      // Time for a refusal to come, were one to (none may: no share applies below the mark).
      await sleep(300);
      const held = sockets.filter((s) => !s.socket.destroyed).length;
      expect(held).toBe(attempts);

      // Meanwhile another client is served.
      for (let i = 0; i < 5; i++) expect((await fetchFrom(svc.url, '/health')).status).toBe(200);

      const lifetimes = await Promise.all(sockets.map((s) => s.closedAfterMs));
      const heldLifetimes = lifetimes.sort((a, b) => a - b).slice(attempts - held);
      // Cut by the header bound, not sooner (a timer never fires early); that it was the header
      // bound is counted below (closed: header_timeout), not timed: how late depends on the load.
      for (const ms of heldLifetimes) expect(ms).toBeGreaterThanOrEqual(headerTimeoutMs * 0.9);
      console.info(`slowloris: ${held}/${attempts} sockets held, lived ${heldLifetimes[0]}-${heldLifetimes.at(-1)} ms`);
      // Counted: none refused (the service was never near its maximum), each cut by the header bound.
      const metricsAfter = await scrape(svc);
      const delta = (kind: 'refused' | 'closed', reason: string) =>
        counted(metricsAfter, kind, reason) - counted(metricsBefore, kind, reason);
      expect(delta('refused', 'per_client')).toBe(0);
      expect(delta('closed', 'header_timeout')).toBe(attempts);
    } finally {
      clearInterval(trickle);
    }

    const answer = await longAnswer;
    expect(answer.status).toBe(200);
    expect(answer.body).toContain('three');
    expect(answer.body).toContain('data: [DONE]');
    expect(Date.now() - started).toBeGreaterThan(3 * 1300 * 0.9);
  });

  it('near the maximum (24 of 32 open), a client over its share (8) is answered 503 with Retry-After, not reset; another client is served; below the mark the same client is served again', async () => {
    const before = await scrape(svc);
    // The attacker's keep-alive connections, each with a request answered, then idle (not
    // reclaimed: idle ones go only within 2 of the maximum).
    const held: Socket[] = [];
    for (let i = 0; i < 24; i++) {
      const { socket } = await rawSocket(port);
      const answer = await exchange(socket, 'GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
      expect(answer.status).toBe(200);
      held.push(socket);
    }
    expect(held.every((s) => !s.destroyed)).toBe(true);

    const over = await rawSocket(port);
    const refused = await exchange(over.socket, 'GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers.connection).toBe('close');
    // The service's dialect (openai here): { error: { message, type, code } }.
    expect(JSON.parse(refused.body)).toMatchObject({ error: { type: 'overloaded' } });
    await over.closedAfterMs;
    // A request with a body: read before the answer, so the 503 is not lost to a reset.
    const withBody = await rawSocket(port);
    const payload = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(2000) }] });
    const refusedPost = await exchange(
      withBody.socket,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n${payload}`,
    );
    expect(refusedPost.status).toBe(503);

    // Another address holds nothing: served.
    expect((await fetchFrom(svc.url, '/health')).status).toBe(200);
    // Counted as refusals for the client's share, answered.
    const after = await scrape(svc);
    expect(counted(after, 'refused', 'per_client') - counted(before, 'refused', 'per_client')).toBe(2);
    expect(svc.runtime.info.connections?.().refused_answered).toBeGreaterThanOrEqual(2);

    // Below the mark again: the same client is served.
    for (const s of held.splice(0, 4)) s.destroy();
    await sleep(50);
    const again = await rawSocket(port);
    expect(
      (await exchange(again.socket, 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')).status,
    ).toBe(200);
    for (const s of held) s.destroy();
  });

  it('a stalled request body is cut after body_idle_timeout_ms; a slow but steady upload is served', async () => {
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(300) }] });
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;

    const before = counted(await scrape(svc), 'closed', 'body_stalled');
    const stalled = await rawSocket(port);
    stalled.socket.write(head + body.slice(0, 20));
    const stalledMs = await stalled.closedAfterMs;
    expect(stalledMs).toBeGreaterThanOrEqual(bodyIdleMs * 0.9); // the reason is counted next
    expect(counted(await scrape(svc), 'closed', 'body_stalled')).toBe(before + 1);

    // 10 chunks 400 ms apart: 4 s in all, each gap well under the bound.
    const steady = await rawSocket(port, '127.0.0.1');
    let answer = '';
    steady.socket.setEncoding('utf8');
    steady.socket.on('data', (d: string) => {
      answer += d;
    });
    steady.socket.write(head);
    const step = Math.ceil(body.length / 10);
    for (let i = 0; i < body.length; i += step) {
      await sleep(400);
      expect(steady.socket.destroyed).toBe(false);
      steady.socket.write(body.slice(i, i + step));
    }
    const until = Date.now() + 5000;
    while (!answer.includes('\r\n\r\n') && Date.now() < until) await sleep(20);
    expect(answer.split(' ')[1]).toBe('200');
    steady.socket.destroy();
    console.info(`stalled body: cut after ${stalledMs} ms`);
  });

  it('a WebSocket handshake with a wrong or missing key is refused before the upgrade', async () => {
    const before = counted(await scrape(svc), 'refused', 'upgrade_refused');
    for (const headers of [{ authorization: 'Bearer sk-wrong' }, {}]) {
      const ws = new WebSocket(`${svc.url.replace('http', 'ws')}/v1/chat/stream`, { headers, localAddress: attacker });
      ws.on('error', () => {});
      const [, res] = (await once(ws, 'unexpected-response')) as [unknown, { statusCode: number }];
      expect(res.statusCode).toBe(401);
    }
    // Many refused handshakes leave nothing open, and others are served.
    const refused = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const ws = new WebSocket(`${svc.url.replace('http', 'ws')}/v1/chat/stream`, { localAddress: attacker });
        ws.on('error', () => {});
        const [, res] = (await once(ws, 'unexpected-response')) as [unknown, { statusCode: number }];
        return res.statusCode;
      }),
    );
    expect(refused.every((s) => s === 401)).toBe(true);
    expect(counted(await scrape(svc), 'refused', 'upgrade_refused')).toBe(before + 22);
    expect((await fetchFrom(svc.url, '/health')).status).toBe(200);
  });

  it('authenticated WebSockets above max_upgraded_connections get 503; others are still served; an idle one is closed', async () => {
    const url = `${svc.url.replace('http', 'ws')}/v1/chat/stream`;
    const headers = { authorization: `Bearer ${key}` };
    const open: Array<{ ws: WebSocket; openedAt: number; closed: Promise<[number, Buffer]> }> = [];
    for (let i = 0; i < 4; i++) {
      // Timed from before the handshake: the server's idle timer starts after it, whatever the load.
      const openedAt = Date.now();
      const ws = new WebSocket(url, { headers, localAddress: attacker });
      await once(ws, 'open');
      open.push({ ws, openedAt, closed: once(ws, 'close') as Promise<[number, Buffer]> });
    }
    const extra = new WebSocket(url, { headers, localAddress: attacker });
    extra.on('error', () => {});
    const before = counted(await scrape(svc), 'refused', 'upgrade_limit');
    const [, res] = (await once(extra, 'unexpected-response')) as [unknown, { statusCode: number }];
    expect(res.statusCode).toBe(503);
    expect(counted(await scrape(svc), 'refused', 'upgrade_limit')).toBeGreaterThanOrEqual(before + 1);
    expect((await fetchFrom(svc.url, '/health')).status).toBe(200);

    // Nobody sends anything: each socket is closed (1000) after the idle bound, not before.
    for (const { openedAt, closed } of open) {
      const [code] = await closed;
      expect(code).toBe(1000);
      const lived = Date.now() - openedAt;
      expect(lived).toBeGreaterThanOrEqual(wsIdleMs * 0.9); // nothing else closes them with 1000
    }
    // Their slots are free again.
    const again = new WebSocket(url, { headers, localAddress: attacker });
    await once(again, 'open');
    again.close();
  });
});

describe('idle keep-alive connections near max_connections', () => {
  let svc: StartedService;

  beforeAll(async () => {
    // One client may take every slot here: only the reclaiming of idle connections lets others in.
    svc = await startService(writeServiceFile(yaml), {
      set: ['limits.max_connections=16', 'limits.max_connections_per_client=16'],
    });
  });
  afterAll(() => svc?.close());

  it('a client holding every connection idle cannot lock another out: the oldest idle ones are closed', async () => {
    const port = portOf(svc.url);
    const held: Array<{ socket: Socket; closedAfterMs: Promise<number> }> = [];
    for (let i = 0; i < 20; i++) {
      const s = await rawSocket(port);
      const answered = new Promise<void>((resolve) => {
        s.socket.once('data', () => resolve());
        s.socket.once('close', () => resolve());
      });
      s.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n'); // keep-alive: stays open idle
      await answered;
      held.push(s);
    }
    const openBefore = held.filter((s) => !s.socket.destroyed).length;
    expect(openBefore).toBeLessThan(16);

    for (let i = 0; i < 10; i++) expect((await fetchFrom(svc.url, '/health')).status).toBe(200);
    const snapshot = svc.runtime.info.connections?.();
    expect(snapshot?.reclaimed).toBeGreaterThan(0);
    expect(snapshot?.refused).toBe(0);
    const text = await scrape(svc);
    expect(counted(text, 'closed', 'idle_reclaimed')).toBe(snapshot?.reclaimed);
    expect(counted(text, 'refused', 'max_connections')).toBe(0);
    // The first connections were the ones closed.
    expect(held[0]?.socket.destroyed).toBe(true);
    console.info(`idle keep-alive: attacker held ${openBefore} of 16; reclaimed ${snapshot?.reclaimed}`);
    for (const s of held) s.socket.destroy();
  });
});

describe('connection refusal metrics', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(writeServiceFile(yaml), { set: ['limits.max_connections=2'] });
  });
  afterAll(() => svc?.close());

  it('are exported with every reason from the start, valid for promtool, and count refusals over max_connections and of a foreign Host', async () => {
    const first = await scrape(svc);
    expect(first).toMatch(/^# TYPE switchyard_connections_refused_total counter$/m);
    expect(first).toMatch(/^# TYPE switchyard_connections_closed_total counter$/m);
    for (const reason of ['max_connections', 'per_client', 'upgrade_limit', 'upgrade_refused'])
      expect(first).toMatch(
        new RegExp(`^switchyard_connections_refused_total\\{reason="${reason}",service="fairness"\\} 0$`, 'm'),
      );
    for (const reason of ['header_timeout', 'body_stalled', 'idle_reclaimed', 'slow_header_reclaimed'])
      expect(first).toMatch(
        new RegExp(`^switchyard_connections_closed_total\\{reason="${reason}",service="fairness"\\} 0$`, 'm'),
      );

    // Two connections open (the maximum), neither has sent a request yet but both are young (under
    // slow_header_ms): a third is answered 503 with Retry-After once its request is read, and counted.
    const port = portOf(svc.url);
    const held = [await rawSocket(port, '127.0.0.1'), await rawSocket(port, '127.0.0.1')];
    const third = await rawSocket(port, '127.0.0.1');
    const refused = await exchange(third.socket, 'GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    await third.closedAfterMs;
    for (const s of held) s.socket.destroy();
    await Promise.all(held.map((s) => s.closedAfterMs));
    // A request naming a host outside hosts.allow (DNS rebinding): 403, counted as a rejected request.
    let forbidden = 0;
    for (let i = 0; i < 20 && forbidden === 0; i++) {
      forbidden = await fetchFrom(svc.url, '/health', { headers: { host: 'attacker.example' } }).then(
        (a) => (a.status === 403 ? 1 : 0),
        () => 0, // the server may still count a closed slot as open for a moment
      );
      if (forbidden === 0) await sleep(50);
    }
    expect(forbidden).toBe(1);
    const text = await scrape(svc);
    expect(counted(text, 'refused', 'max_connections')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'switchyard_requests_rejected_total{reason="host_not_allowed"')).toBe(1);

    // A real Prometheus parser and linter when there is one (Debian's `prometheus` package).
    const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    if (promtool.error) {
      if (process.env.CI === 'true') throw new Error(`promtool is required under CI: ${promtool.error.message}`);
      return;
    }
    const output = `${promtool.stdout}${promtool.stderr}`;
    expect(output).not.toMatch(/error while linting|parsing error/);
    expect(output).not.toMatch(/switchyard_connections_/);
  });
});

describe('connection limits on reload', () => {
  it('a reload applies new header timeout (checked at the pace it needs) and per-client cap to new connections', async () => {
    // The bound before the reload is ten minutes: a connection still under it would outlive the test.
    const file = writeServiceFile(yaml.replace(`header_timeout_ms: ${headerTimeoutMs}`, 'header_timeout_ms: 600000'));
    const svc = await startService(file);
    try {
      const port = portOf(svc.url);
      writeFileSync(
        file,
        yaml
          .replace(`header_timeout_ms: ${headerTimeoutMs}`, 'header_timeout_ms: 500\n  slow_header_ms: 100')
          // Under pressure from the first connection: the share of 2 applies at once.
          .replace('max_connections_per_client: 8', 'max_connections_per_client: 2\n  connections_high_water: 0.01'),
      );
      expect((await svc.runtime.reload()).ok).toBe(true);
      const sockets = await Promise.all([1, 2, 3].map(() => rawSocket(port)));
      for (const { socket } of sockets) socket.write('GET /health HTTP/1.1\r\n');
      const lifetimes = (await Promise.all(sockets.map((s) => s.closedAfterMs))).sort((a, b) => a - b);
      // One over the new share (its refusal or its reclaim counted, not timed); the others after the
      // new header bound (under the old one they would outlive the test: nothing timed here).
      const after = await scrape(svc);
      expect(
        counted(after, 'refused', 'per_client') + counted(after, 'closed', 'slow_header_reclaimed'),
      ).toBeGreaterThanOrEqual(1);
      for (const ms of lifetimes.slice(1)) {
        expect(ms).toBeGreaterThanOrEqual(450);
      }

      // Connections opened a quarter of a second apart (from addresses of their own: the cap is
      // 2 now): checked at the pace of the old ten-minute bound, one of them would live far longer
      // than its 500 ms; checked every 125 ms, none does.
      const staggered: Array<Promise<number>> = [];
      for (const address of ['127.0.0.11', '127.0.0.12', '127.0.0.13', '127.0.0.14']) {
        const s = await rawSocket(port, address);
        s.socket.write('GET /health HTTP/1.1\r\n');
        staggered.push(s.closedAfterMs);
        await sleep(250);
      }
      const longest = Math.max(...(await Promise.all(staggered)));
      expect(longest).toBeGreaterThanOrEqual(450);
      // The pace itself, read from the server rather than timed (1050 ms against 1.2 s failed on a
      // loaded machine): Node checks header deadlines every 125 ms after the reload, not every 1 s.
      type Listeners = { servers: Array<{ connectionsCheckingInterval: number }> };
      const servers = (svc.runtime as unknown as { listeners: Listeners }).listeners.servers;
      expect(servers[0]?.connectionsCheckingInterval).toBe(125); // the main listener (the admin one keeps its own)
      console.info(`staggered sockets: the longest lived ${longest} ms`);
    } finally {
      await svc.close();
    }
  });
});
