/**
 * The exchange contract through the real proxy stage and a real upstream: the request view (what
 * goes upstream), and the answer store (a stage's status after next(), trailers, the end hook).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import proxyPlugin from '../../plugins/proxy/index.ts';
import { answerOf, readJson, requestOf, type Stage } from '../../runtime/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import type { StageInstance } from '../../runtime/plugin.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';
import { serveStages } from '../helpers/stage-harness.ts';

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
}
let received: Received | undefined;
let upstreamUrl = '';
const closers: Array<() => unknown> = [];

/** Answers by path: /json (a JSON echo of what it got), /stream (three SSE events), /cut (headers, then a reset). */
function upstreamHandler(req: IncomingMessage, res: ServerResponse): void {
  let body = '';
  req.on('data', (c) => {
    body += c;
  });
  req.on('end', () => {
    received = { headers: req.headers, body };
    if (req.url === '/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n');
      res.write('data: {"n":2}\n\n');
      res.end('data: [DONE]\n\n');
      return;
    }
    if (req.url === '/bad') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"delta":{"content":"hi"}}]}\n\n');
      res.write('data: not json\n\n');
      res.end('data: [DONE]\n\n');
      return;
    }
    if (req.url === '/cut') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      setTimeout(() => res.socket?.destroy(), 20);
      return;
    }
    const json = JSON.stringify({ ok: true });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
    res.end(json);
  });
}

beforeAll(async () => {
  const server = createServer(upstreamHandler);
  upstreamUrl = await listenLocal(server);
  closers.push(() => closeNow(server));
});
afterAll(() => {
  for (const close of closers) close();
});

async function proxy(forward: string[] = []): Promise<Stage> {
  const u = createUpstream('up', { kind: 'http', url: upstreamUrl } as never, {
    logger: silentLogger,
    configDir: process.cwd(),
  });
  closers.push(() => u.close());
  const made = await proxyPlugin.create(
    { upstream: 'up', forward_headers: forward, via: 'auto' } as never,
    createTestEnv({ upstreams: { up: u } }),
  );
  return (made as StageInstance).handle;
}

async function serve(stages: Stage[]): Promise<string> {
  const server = await serveStages(stages);
  closers.push(server.close);
  return server.url;
}

describe('the request view', () => {
  it('a header a stage sets goes upstream without forward_headers; one it removes does not, listed or not', async () => {
    const stage: Stage = async (ctx, next) => {
      requestOf(ctx).setHeader('X-Stage-Count', 3);
      requestOf(ctx).removeHeader('x-listed');
      await next();
    };
    const url = await serve([stage, await proxy(['x-listed', 'x-kept'])]);
    const res = await fetch(`${url}/json`, { headers: { 'x-listed': 'a', 'x-kept': 'b', 'x-stage-count': 'client' } });
    expect(res.status).toBe(200);
    expect(received?.headers['x-stage-count']).toBe('3');
    expect(received?.headers['x-listed']).toBeUndefined();
    expect(received?.headers['x-kept']).toBe('b');
  });

  it('refuses connection-level names and unsafe values (the stage fails: 500)', async () => {
    for (const set of [
      (s: ReturnType<typeof requestOf>) => s.setHeader('Content-Length', '1'),
      (s: ReturnType<typeof requestOf>) => s.setHeader('X-Ok', 'a\r\nb: c'),
    ]) {
      const stage: Stage = async (ctx, next) => {
        set(requestOf(ctx));
        await next();
      };
      const url = await serve([stage, await proxy()]);
      expect((await fetch(`${url}/json`)).status).toBe(500);
    }
  });

  it('setJson re-serialises the body (changed in place included); unchanged, it goes as sent', async () => {
    const change: Stage = async (ctx, next) => {
      const body = (await readJson(ctx)) as Record<string, unknown>;
      body.added = true;
      requestOf(ctx).setJson(body);
      await next();
    };
    const url = await serve([change, await proxy()]);
    await fetch(`${url}/json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a": 1}' });
    expect(JSON.parse(received?.body ?? '')).toEqual({ a: 1, added: true });

    const read: Stage = async (ctx, next) => {
      await readJson(ctx);
      await next();
    };
    const url2 = await serve([read, await proxy()]);
    await fetch(`${url2}/json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":  1}' });
    expect(received?.body).toBe('{"a":  1}');
  });
});

describe('the answer store', () => {
  it("a stage's ctx.status after next() is honoured on a proxied answer, as a header it sets is", async () => {
    const created: Stage = async (ctx, next) => {
      await next();
      ctx.status = 201;
      ctx.set('X-After', 'yes');
    };
    const url = await serve([created, await proxy()]);
    const res = await fetch(`${url}/json`);
    expect(res.status).toBe(201);
    expect(res.headers.get('x-after')).toBe('yes');
    expect(await res.json()).toEqual({ ok: true });
  });

  it('trailers on a stream, read when it ends, after the end hooks', async () => {
    const order: string[] = [];
    const counting: Stage = async (ctx, next) => {
      await next();
      const answer = answerOf(ctx);
      let events = 0;
      answer.filterEvents({
        onEvent() {
          events++;
          return undefined;
        },
      });
      answer.onEnd((complete) => order.push(`end ${complete}`));
      answer.trailer('X-Events', () => {
        order.push('trailer');
        return String(events);
      });
    };
    const url = await serve([counting, await proxy()]);
    const res = await undiciRequest(`${url}/stream`);
    expect(res.headers.trailer).toBe('X-Events');
    const text = await res.body.text();
    expect(text).toContain('[DONE]');
    expect(res.trailers['x-events']).toBe('3');
    expect(order).toEqual(['end true', 'trailer']);
  });

  it('a trailer on a stream nobody filters, and on a whole answer (sent as a header)', async () => {
    const stamp: Stage = async (ctx, next) => {
      await next();
      answerOf(ctx).trailer('X-Total', () => 'seven');
    };
    const url = await serve([stamp, await proxy()]);
    const streamed = await undiciRequest(`${url}/stream`);
    expect(await streamed.body.text()).toContain('{"n":2}');
    expect(streamed.trailers['x-total']).toBe('seven');
    const whole = await fetch(`${url}/json`);
    expect(whole.headers.get('x-total')).toBe('seven');
  });

  it('an error before the first byte with a trailer announced is a 502, not a crash', async () => {
    let ended: boolean | undefined;
    const stamp: Stage = async (ctx, next) => {
      await next();
      const answer = answerOf(ctx);
      answer.filterEvents({ onEvent: () => undefined });
      answer.trailer('X-Total', () => '1');
      answer.onEnd((complete) => {
        ended = complete;
      });
    };
    const url = await serve([stamp, await proxy()]);
    const res = await fetch(`${url}/cut`);
    expect(res.status).toBe(502);
    expect(res.headers.get('trailer')).toBeNull();
    expect(await res.json()).toMatchObject({ error: 'upstream_error' });
    expect(ended).toBe(false);
    // The server is still up.
    expect((await fetch(`${url}/json`)).status).toBe(200);
  });

  it('the OpenAI wire view: parsed chunks and [DONE]; an event that is not a chunk refused, or skipped when asked', async () => {
    const seen: string[] = [];
    const reader = (invalid: 'refuse' | 'skip'): Stage =>
      async function wire(ctx, next) {
        await next();
        answerOf(ctx).filterOpenAIChunks(
          {
            onChunk: (chunk) => {
              seen.push(`chunk ${chunk.text}`);
              return undefined;
            },
            onDone: () => {
              seen.push('done');
              return undefined;
            },
            refuse: () => [{ event: 'error', data: '{"refused":true}' }],
          },
          { invalid },
        );
      };
    const refusing = await serve([reader('refuse'), await proxy()]);
    const refused = await (await fetch(`${refusing}/bad`)).text();
    expect(refused).toContain('"content":"hi"');
    expect(refused).toContain('event: error');
    expect(refused).not.toContain('[DONE]');
    expect(seen).toEqual(['chunk hi']);

    seen.length = 0;
    const skipping = await serve([reader('skip'), await proxy()]);
    const skipped = await (await fetch(`${skipping}/bad`)).text();
    expect(skipped).toContain('data: not json');
    expect(skipped).toContain('[DONE]');
    expect(seen).toEqual(['chunk hi', 'done']);
  });
});
