/**
 * The answer phase through a real service: an upstream (a fixture speaking raw HTTP) answers
 * compressed, oversized, mistyped, invalid or cut-short bodies and event streams; the example
 * stage of docs/plugins.md (`banned-words`, test/fixtures/answer-stages.ts) reads them. What a
 * stage must read is decoded once (bounded) before it reads it; what it cannot read is refused
 * (502 in the dialect), or passed unread only when the stage says `on_uninspectable: pass`:
 * marked, counted and never silent. An answer no stage reads goes out as it came.
 */
import { createServer, get as httpGet, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { sample } from '../helpers/prometheus.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

const clean = Buffer.from(JSON.stringify({ answer: 'all fine here' }));
const banned = Buffer.from(JSON.stringify({ answer: 'this mentions the FORBIDDEN word' }));
/** 64 MiB of JSON that gzip packs into ~64 KiB: far over the service's 1 MiB answer limit. */
const bomb = gzipSync(
  Buffer.concat([Buffer.from('{"pad":"'), Buffer.alloc(64 * 1024 * 1024, 0x61), Buffer.from('"}')]),
);

function answer(res: ServerResponse, body: Buffer, headers: Record<string, string>): void {
  res.writeHead(200, { 'content-length': String(body.length), ...headers });
  res.end(body);
}

const json = { 'content-type': 'application/json' };
const routes: Record<string, (res: ServerResponse) => void> = {
  '/clean': (res) => answer(res, clean, { ...json, 'x-custom': 'upstream' }),
  '/banned': (res) => answer(res, banned, json),
  '/gzip-banned': (res) => answer(res, gzipSync(banned), { ...json, 'content-encoding': 'gzip' }),
  '/br-banned': (res) => answer(res, brotliCompressSync(banned), { ...json, 'content-encoding': 'br' }),
  '/deflate-banned': (res) => answer(res, deflateSync(banned), { ...json, 'content-encoding': 'deflate' }),
  '/gzip-clean': (res) => answer(res, gzipSync(clean), { ...json, 'content-encoding': 'gzip' }),
  '/bomb': (res) => answer(res, bomb, { ...json, 'content-encoding': 'gzip' }),
  '/zstd': (res) => answer(res, banned, { ...json, 'content-encoding': 'zstd' }),
  '/text': (res) => answer(res, Buffer.from('the FORBIDDEN word, as text'), { 'content-type': 'text/plain' }),
  '/invalid': (res) => answer(res, Buffer.from('{"answer": "FORBIDDEN'), json),
  '/cut': (res) => {
    res.writeHead(200, { ...json, 'content-length': '1000' });
    res.write('{"answer": "the beginning');
    setTimeout(() => res.socket?.destroy(), 20);
  },
  '/sse': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('data: one\n\ndata: two FORBIDDEN\n\ndata: three\n\n');
  },
  '/sse-gzip': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
    res.end(gzipSync('data: one\n\ndata: two FORBIDDEN\n\ndata: three\n\n'));
  },
};

const upstream = createServer((req: IncomingMessage, res: ServerResponse) => {
  req.resume();
  const path = (req.url ?? '/').replace(/^\/(checked|passing|unread)/, '');
  (routes[path] ?? ((r: ServerResponse) => r.writeHead(404).end()))(res);
});

let svc: StartedService;
beforeAll(async () => {
  const base = await listenLocal(upstream);
  const file = writeServiceFile(`
service: answer-test
listen: { port: 0 }
metrics: { port: 0 }
limits: { answer_bytes: 1048576 }
plugins: [${JSON.stringify(join(import.meta.dirname, '../fixtures/answer-stages.ts'))}]
upstreams:
  raw: { kind: http, url: "${base}" }
routes:
  - match: { method: GET, path: /checked/:what }
    pipeline:
      - response-headers: { set: { X-Custom: { value: gateway } } }
      - banned-words: { words: [forbidden] }
      - proxy: { upstream: raw }
  - match: { method: GET, path: /passing/:what }
    pipeline:
      - banned-words: { words: [forbidden] }
        on_uninspectable: pass
      - proxy: { upstream: raw }
  - match: { method: GET, path: /unread/:what }
    pipeline:
      - proxy: { upstream: raw }
`);
  svc = await startService(file);
});
afterAll(async () => {
  await svc?.close();
  closeNow(upstream);
});

const get = (path: string) => fetch(`${svc.url}${path}`);
/** switchyard_answers_unchecked_total of the banned-words stage of a route. */
const unchecked = async (route: 'checked' | 'passing', outcome: string, reason: string) => {
  const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
  const labels = `stage="GET /${route}/:what:banned-words",reason="${reason}",outcome="${outcome}"`;
  return sample(text, `switchyard_answers_unchecked_total{${labels}`) ?? 0;
};

/** The raw bytes and headers of an answer (fetch would decode a compressed body). */
function rawGet(url: string): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    httpGet(url, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

describe('the answer phase', () => {
  it('a stage reads a plain JSON answer; the headers a stage set win over the upstream', async () => {
    const ok = await get('/checked/clean');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ answer: 'all fine here' });
    expect(ok.headers.get('x-custom')).toBe('gateway');
    const refused = await get('/checked/banned');
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: 'policy_violation', details: { word: 'FORBIDDEN' } });
  });

  it('decodes gzip, br and deflate once before the stage reads, and answers identity', async () => {
    for (const path of ['/checked/gzip-banned', '/checked/br-banned', '/checked/deflate-banned']) {
      expect((await get(path)).status, path).toBe(403);
    }
    const ok = await get('/checked/gzip-clean');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-encoding')).toBeNull();
    expect(await ok.json()).toEqual({ answer: 'all fine here' });
  });

  it('refuses what it cannot read: a decompression bomb, an unknown encoding, text, invalid JSON', async () => {
    const cases: Array<[string, string]> = [
      ['/checked/bomb', 'too_large'],
      ['/checked/zstd', 'encoding'],
      ['/checked/text', 'content_type'],
      ['/checked/invalid', 'invalid_json'],
    ];
    for (const [path, reason] of cases) {
      const before = await unchecked('checked', 'refused', reason);
      const res = await get(path);
      expect(res.status, path).toBe(502);
      expect(await res.json(), path).toMatchObject({ error: 'upstream_error', details: { unchecked: reason } });
      expect(await unchecked('checked', 'refused', reason), path).toBe(before + 1);
    }
  });

  it('an answer cut short by the upstream is a 502, not a 500 and not a success', async () => {
    const res = await get('/checked/cut');
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: 'upstream_error' });
  });

  it('on_uninspectable: pass lets it through unread, marked and counted', async () => {
    const before = await unchecked('passing', 'passed', 'content_type');
    const res = await get('/passing/text');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-answer-unchecked')).toBe('content_type');
    expect(await res.text()).toBe('the FORBIDDEN word, as text');
    expect(await unchecked('passing', 'passed', 'content_type')).toBe(before + 1);
    // What it can read is still checked.
    expect((await get('/passing/banned')).status).toBe(403);
  });

  it('checks an event stream as it passes, compressed or not, and ends it where the stage says', async () => {
    for (const path of ['/checked/sse', '/checked/sse-gzip']) {
      const res = await get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-encoding'), path).toBeNull();
      const text = await res.text();
      expect(text, path).toMatch(/^data: one\n\nevent: error\ndata: \{.*"word":"FORBIDDEN".*\}\n\n$/);
      expect(text, path).not.toContain('three');
    }
  });

  it('an answer no stage reads goes out as it came, compressed included', async () => {
    const res = await rawGet(`${svc.url}/unread/gzip-banned`);
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.body.equals(gzipSync(banned))).toBe(true);
  });
});
