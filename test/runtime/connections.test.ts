import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceRuntime } from '../../runtime/service/runtime.ts';
import { until } from '../helpers/servers.ts';

const basic = join(import.meta.dirname, '../fixtures/basic.yaml');

/** A raw keep-alive HTTP/1.1 connection, to know exactly which socket carries which request. */
class RawClient {
  private buffer = '';
  private waiting: Array<() => void> = [];
  closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.buffer += d;
      for (const w of this.waiting.splice(0)) w();
    });
    socket.on('error', () => {});
    this.closed = once(socket, 'close').then(() => undefined);
  }

  static async open(port: number): Promise<RawClient> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return new RawClient(socket);
  }

  get client(): string {
    return `127.0.0.1:${this.socket.localPort}`;
  }

  send(path: string): void {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  }

  /** Waits for one whole response (Content-Length framed) and returns its status. */
  async response(): Promise<number> {
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.buffer.slice(0, end);
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (this.buffer.length >= end + 4 + length) {
          this.buffer = this.buffer.slice(end + 4 + length);
          return Number(head.split(' ')[1]);
        }
      }
      await new Promise<void>((r) => this.waiting.push(r));
    }
  }

  close(): Promise<void> {
    this.socket.end();
    return this.closed;
  }
}

describe('connection tracking on the main listener', () => {
  let runtime: ServiceRuntime;
  let port: number;
  const snapshot = () => {
    const s = runtime.info.connections?.();
    if (!s) throw new Error('ServiceInfo.connections is not set');
    return s;
  };
  const entry = (c: RawClient) => snapshot().clients.find((x) => x.client === c.client);

  beforeAll(async () => {
    runtime = await ServiceRuntime.start(basic, {
      set: ['listen.port=0', 'metrics.port=0', 'admin.port=0', 'limits.max_connections=3', 'logging.level=silent'],
    });
    port = runtime.info.ports.main as number;
  });
  afterAll(() => runtime?.close());

  it('counts requests and in-flight requests per client connection', async () => {
    const before = snapshot().total;
    const a = await RawClient.open(port);
    await until(() => entry(a) !== undefined, 2000);
    expect(entry(a)).toMatchObject({ requests: 0, in_flight: 0 });
    expect(snapshot().total).toBe(before + 1);

    a.send('/slow'); // 400 ms
    await until(() => entry(a)?.in_flight === 1, 2000);
    expect(entry(a)?.requests).toBe(1);
    expect(await a.response()).toBe(200);
    await until(() => entry(a)?.in_flight === 0, 2000);

    a.send('/echo');
    expect(await a.response()).toBe(200);
    a.send('/nope');
    expect(await a.response()).toBe(404);
    await until(() => entry(a)?.in_flight === 0, 2000);
    const e = entry(a);
    expect(e?.requests).toBe(3);
    expect(Date.parse(e?.connected_at ?? '')).toBeLessThanOrEqual(Date.now());
    expect(e?.duration_ms).toBeGreaterThanOrEqual(400);
    expect(snapshot().max).toBe(3);

    await a.close();
    await until(() => entry(a) === undefined, 2000);
    expect(snapshot().total).toBe(before + 1);
  });

  it('refuses connections above limits.max_connections, and accepts again when one closes', async () => {
    await until(() => snapshot().active === 0, 2000);
    const open = await Promise.all([1, 2, 3].map(() => RawClient.open(port)));
    await until(() => snapshot().active === 3, 2000);
    const refusedBefore = snapshot().refused;

    const extra = await RawClient.open(port);
    extra.send('/echo');
    await extra.closed; // closed by the server without an answer
    expect(snapshot().active).toBe(3);
    expect(snapshot().refused).toBe(refusedBefore + 1);
    for (const c of open) {
      c.send('/echo');
      expect(await c.response()).toBe(200);
    }

    await open[0]?.close();
    await until(() => snapshot().active === 2, 2000);
    const again = await RawClient.open(port);
    again.send('/echo');
    expect(await again.response()).toBe(200);
    await Promise.all([again, ...open.slice(1)].map((c) => c.close()));
  });
});

describe('limits.max_connections on reload', () => {
  it('a reload applies a new maximum to new connections', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-conn-'));
    const file = join(dir, 'service.yaml');
    const yaml = (max: number) => `service: conn
listen: { port: 0 }
limits: { max_connections: ${max} }
logging: { level: silent }
routes:
  - match: { method: GET, path: /ok }
    pipeline: [{ respond: { body: { ok: true } } }]
`;
    writeFileSync(file, yaml(1));
    const runtime = await ServiceRuntime.start(file);
    try {
      const port = runtime.info.ports.main as number;
      const first = await RawClient.open(port);
      await until(() => runtime.info.connections?.().active === 1, 2000);
      const second = await RawClient.open(port);
      await second.closed;

      writeFileSync(file, yaml(2));
      expect((await runtime.reload()).ok).toBe(true);
      expect(runtime.info.connections?.().max).toBe(2);
      const third = await RawClient.open(port);
      third.send('/ok');
      expect(await third.response()).toBe(200);
      await Promise.all([first.close(), third.close()]);
    } finally {
      await runtime.close();
    }
  });
});
