/**
 * A provider that echoes the gateway's key never hands it to a client (issue 29, item 9). The
 * safety filter (configs/safety-filter.yaml) has its `llm` upstream pointed at a fixture provider
 * with a key of its own (`api_key_env`, a 32-hex key as in the report); the provider quotes the
 * Authorization it received in a header and in its body - in a 401 as some providers do, in a
 * 200 answer whose body arrives in pieces with the key cut between them, compressed although it
 * was asked not to be, and in an event stream. The client sees a marker of the same length each
 * time, never the key; the answers stay well-formed (lengths, JSON, SSE events).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { redactionMarker } from '../../runtime/upstreams/secret-scrub.ts';

const key = randomBytes(16).toString('hex');
const marker = redactionMarker(key.length);
const devKey = 'sk-dev-local-0001';
let provider: Server;
let svc: StartedService;
/** What the provider was sent: the encodings it was asked for. */
const acceptEncodings: Array<string | undefined> = [];

function completion(content: string) {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'echo',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** A provider that behaves by the request's `model`, always quoting the Authorization it got. */
function handle(req: IncomingMessage, res: ServerResponse, body: { model: string }): void {
  acceptEncodings.push(req.headers['accept-encoding']);
  const auth = String(req.headers.authorization);
  const sent = auth.replace(/^Bearer /, '');
  const echo = { 'x-echo-authorization': auth };
  switch (body.model) {
    case 'echo-401': {
      const text = JSON.stringify({
        error: {
          message: `Incorrect API key provided: ${sent}. You can find your API key at https://example.test.`,
          type: 'invalid_request_error',
          code: 'invalid_api_key',
        },
      });
      res.writeHead(401, { ...echo, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    case 'echo-pieces': {
      // No Content-Length; the key cut between two writes a moment apart.
      const text = JSON.stringify(completion(`Your key is ${sent}, keep it safe.`));
      const cut = text.indexOf(sent) + 7;
      res.writeHead(200, { ...echo, 'content-type': 'application/json' });
      res.write(text.slice(0, cut));
      sleep(30).then(() => res.end(text.slice(cut)));
      return;
    }
    case 'echo-gzip': {
      const zipped = gzipSync(JSON.stringify({ error: { message: `Bad key ${sent}`, code: 'invalid_api_key' } }));
      res.writeHead(401, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end(zipped);
      return;
    }
    case 'echo-stream': {
      res.writeHead(200, { ...echo, 'content-type': 'text/event-stream' });
      const event = (content: string) =>
        `data: ${JSON.stringify({
          id: 'c',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'echo',
          choices: [{ index: 0, delta: { content }, finish_reason: null }],
        })}\n\n`;
      const events = [event('The key: '), event(sent), event(' done.'), 'data: [DONE]\n\n'];
      const all = events.join('');
      const cut = all.indexOf(sent) + 5;
      res.write(all.slice(0, cut));
      sleep(30).then(() => res.end(all.slice(cut)));
      return;
    }
    default:
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"unknown model"}}');
  }
}

beforeAll(async () => {
  provider = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8'))));
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
  // The key comes from the environment, as an operator sets it.
  process.env.ECHO_PROVIDER_KEY = key;
  svc = await startService('configs/safety-filter.yaml', {
    set: [`upstreams.llm={kind: openai, url: "${url}", api_key_env: ECHO_PROVIDER_KEY}`],
    env: {
      FILTER_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'provider-key-echo-')), 'audit.db'),
      FILTER_ADMIN_TOKEN: 'test-admin-token',
    },
  });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  delete process.env.ECHO_PROVIDER_KEY;
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

async function chat(model: string, extra: Record<string, unknown> = {}) {
  const res = await fetch(`${svc.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${devKey}`, 'accept-encoding': 'gzip' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], ...extra }),
  });
  const text = await res.text();
  const headers = JSON.stringify([...res.headers]);
  expect(text).not.toContain(key);
  expect(headers).not.toContain(key);
  return { res, text };
}

describe("a provider echoing the gateway's key", () => {
  it('a 401 quoting it in a header and the body: the client gets the marker in both, with a true length', async () => {
    const { res, text } = await chat('echo-401');
    expect(res.status).toBe(401);
    expect(res.headers.get('x-echo-authorization')).toBe(`Bearer ${marker}`);
    expect(text).toContain(`Incorrect API key provided: ${marker}.`);
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'invalid_api_key' } });
  });

  it('a 200 answer without Content-Length, the key cut between two writes: scrubbed across the cut', async () => {
    const { res, text } = await chat('echo-pieces');
    expect(res.status).toBe(200);
    expect(JSON.parse(text).choices[0].message.content).toBe(`Your key is ${marker}, keep it safe.`);
  });

  it('a gzip answer although identity was asked for: decoded and scrubbed', async () => {
    const { res, text } = await chat('echo-gzip');
    expect(res.status).toBe(401);
    expect(JSON.parse(text)).toMatchObject({ error: { message: `Bad key ${marker}` } });
    // The client asked for gzip; the provider was asked for identity all the same.
    expect(acceptEncodings.at(-1)).toBe('identity');
  });

  it('an event stream with the key cut inside an event: every event whole, the key replaced', async () => {
    const { res, text } = await chat('echo-stream', { stream: true });
    expect(res.status).toBe(200);
    const deltas = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)).choices[0].delta.content)
      .join('');
    expect(deltas).toBe(`The key: ${marker} done.`);
    expect(text).toContain('data: [DONE]');
  });
});
