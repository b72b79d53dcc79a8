/**
 * Streamed answers of a real service (a proxy route in front of an SSE upstream): the runtime
 * pipes them itself (runtime/server/stream-body.ts) and must keep what Koa's stream.pipeline
 * gave: the answer arrives whole with the route's headers, an upstream that dies mid-stream is
 * seen by the client as a cut answer (never as a complete one), and a client that goes away
 * cancels the upstream request.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { listenLocal, until } from '../helpers/servers.ts';

const events = ['data: {"n":1}\n\n', 'data: {"n":2}\n\n', 'data: [DONE]\n\n'];
let upstream: Server;
let svc: StartedService;
let heldClosed = 0;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (req.url === '/sse/ok') {
      for (const e of events) res.write(e);
      res.end();
    } else if (req.url === '/sse/die') {
      res.write(events[0]);
      setTimeout(() => res.socket?.destroy(), 20);
    } else {
      res.write(events[0]);
      req.socket.once('close', () => heldClosed++);
    }
  });
  const upstreamUrl = await listenLocal(upstream);
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-stream-body-'));
  const file = join(dir, 'service.yaml');
  writeFileSync(
    file,
    [
      'service: stream-body',
      'listen: { port: 0 }',
      `upstreams: { up: { kind: http, url: "${upstreamUrl}" } }`,
      'routes:',
      '  - match: { method: GET, path: /sse/:how }',
      '    pipeline:',
      '      - response-headers: { set: { X-Stage: { value: seen } } }',
      '      - proxy: { upstream: up }',
    ].join('\n'),
  );
  svc = await startService(file);
});

afterAll(async () => {
  await svc?.close();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

describe('streamed answers', () => {
  it('arrive whole, byte for byte, with the headers the stages set', async () => {
    const res = await request(`${svc.url}/sse/ok`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.headers['x-stage']).toBe('seen');
    expect(res.headers['x-request-id']).toBeTruthy();
    expect(await res.body.text()).toBe(events.join(''));
  });

  it('an upstream that dies mid-stream cuts the answer: the client never sees a clean end', async () => {
    const res = await request(`${svc.url}/sse/die`);
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow();
  });

  it('a client that goes away cancels the upstream request', async () => {
    const before = heldClosed;
    const res = await request(`${svc.url}/sse/held`);
    for await (const chunk of res.body) {
      expect(String(chunk)).toContain('"n":1');
      break; // leaving the loop destroys the body: the client goes away
    }
    await until(() => heldClosed > before, 3000);
  });
});
