/**
 * readWhole with the answer's declared length: an upstream's small answer comes in the chunk of
 * its headers, and undici has pushed it into the body stream by the time the request's promise
 * calls back, so it is taken from the buffer (bufferedWhole) without listeners; an answer whose
 * body comes later is read as it arrives. Both give the same bytes and leave the stream closed.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWhole } from '../../runtime/answer/answer.ts';
import { countListenersAdded } from '../helpers/listeners.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

const body = Buffer.from(
  JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hi' }] } }),
);

const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
  if (req.url === '/later') {
    res.flushHeaders();
    setTimeout(() => res.end(body), 50);
  } else res.end(body);
});
let pool: Pool;

beforeAll(async () => {
  pool = new Pool(await listenLocal(server));
});
afterAll(async () => {
  await pool.close();
  closeNow(server);
});

describe('readWhole with the declared length', () => {
  it('takes an answer that came with its headers from the buffer, and the stream ends', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await pool.request({ method: 'GET', path: '/' });
      const listened = countListenersAdded(res.body, 'data');
      const closed = once(res.body, 'close');
      const read = await readWhole(res.body, 1024, undefined, Number(res.headers['content-length']));
      expect(read.equals(body)).toBe(true);
      expect(listened()).toBe(0);
      await closed;
      expect(res.body.readableEnded).toBe(true);
    }
  });

  it('reads an answer whose body comes after its headers as it arrives', async () => {
    const res = await pool.request({ method: 'GET', path: '/later' });
    const listened = countListenersAdded(res.body, 'data');
    const read = await readWhole(res.body, 1024, undefined, Number(res.headers['content-length']));
    expect(read.equals(body)).toBe(true);
    expect(listened()).toBe(1);
  });

  it('refuses a declared length over the limit as it refuses a longer body', async () => {
    const res = await pool.request({ method: 'GET', path: '/' });
    await expect(readWhole(res.body, 16, undefined, Number(res.headers['content-length']))).rejects.toMatchObject({
      message: expect.stringContaining('larger than 16 bytes'),
    });
  });
});
