/**
 * What happens to the connection of a refused body (413): read to its end and dropped, the
 * connection stays open for the next request; declared larger than the discard bound
 * (max(64 MiB, 4 x body_bytes)), the 413 comes at once with `Connection: close`, nothing is read;
 * with `Expect: 100-continue`, the 413 is the answer to the expectation and no body is sent.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { RawConnection } from '../helpers/raw-http.ts';

/** Writes `head`, then `body` once the server said 100 Continue; resolves with all it answered until it closed. */
function exchange(port: number, head: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (body !== undefined && text.startsWith('HTTP/1.1 100')) {
        socket.write(body);
        body = undefined;
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
    socket.write(head);
  });
}

describe('a refused body and its connection', () => {
  let svc: StartedService;
  let port: number;
  beforeAll(async () => {
    svc = await startService(join(import.meta.dirname, '../../configs/typed-proxy.yaml'), {
      warmupMs: 1,
      set: ['upstreams.everything={kind: jsonrpc, url: "http://127.0.0.1:9/mcp"}'],
    });
    port = svc.runtime.info.ports.main as number;
  });
  afterAll(() => svc?.close());

  it('a body over the limit but under the bound: 413, and the same connection answers the next request', async () => {
    const conn = await RawConnection.open(port);
    try {
      const big = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { blob: 'x'.repeat(3 * 1024 * 1024) } };
      const refused = await conn.post('/', big);
      expect(refused.status).toBe(413);
      expect(JSON.parse(refused.body)).toMatchObject({ error: 'payload_too_large' });
      expect(refused.headers.connection).not.toBe('close');
      const next = await conn.post('/', { jsonrpc: '2.0', id: 2, method: 'tools/list' });
      expect(next.status).not.toBe(413);
      expect(conn.closed).toBeUndefined();
    } finally {
      conn.close();
    }
  });

  it('Expect: 100-continue with a body over the limit: the 413 instead of the 100, before any body is sent', async () => {
    const text = await exchange(
      port,
      'POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\nExpect: 100-continue\r\n\r\n',
    );
    expect(text).not.toMatch(/^HTTP\/1\.1 100/);
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(text).toContain('"payload_too_large"');
  });

  it('Expect: 100-continue within the limit: 100 Continue, then the answer', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const text = await exchange(
      port,
      `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
      body,
    );
    expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 [2-5]\d\d /);
    expect(text).not.toMatch(/ 413 /);
  });

  it('a declared length over the bound: 413 at once with Connection: close, without waiting for the body', async () => {
    const conn = await RawConnection.open(port);
    try {
      // Declares 100 MiB and sends a few bytes: the answer cannot wait for the rest.
      const answer = await conn.post('/', { jsonrpc: '2.0' }, {}, 100 * 1024 * 1024);
      expect(answer.status).toBe(413);
      expect(answer.headers.connection).toBe('close');
    } finally {
      conn.close();
    }
  });
});
