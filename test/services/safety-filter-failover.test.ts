/**
 * Provider failover, through the safety filter started from configs/safety-filter.yaml: tenants
 * whose backend is an ordered list of OpenAI-compatible providers (fixture servers speaking the
 * real wire format, SSE included) that refuse connections, hang, answer 5xx or 429, die
 * mid-stream, or recover. Which provider served is asserted in X-Filter-Provider and in the audit
 * record; model mapping and the provider keys are asserted at the fixtures.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { openAiHandler, type RecordedRequest } from '../helpers/openai-backend.ts';

const adminToken = 'test-admin-token';
const awsKey = 'AKIAZ7Q3K5M2N8P4R6T1';

type Mode =
  | 'ok'
  | 'hang'
  | '429'
  | '503'
  | 'die-mid-stream'
  | 'headers-only'
  | 'headers-then-hang'
  | 'chunked'
  | 'large'
  | 'body-then-hang';

/** A chat completion as OpenAI answers it, with `content` as the assistant's message. */
function completion(content: string): string {
  return JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
  });
}

/** An OpenAI-compatible provider whose behaviour a test switches; it checks its own API key. */
interface Provider {
  name: string;
  url: string;
  key: string;
  mode: Mode;
  /** Retry-After sent with a 429 / 503 (seconds). */
  retryAfter?: string;
  /** Every request that reached it, whatever it answered. */
  requests: RecordedRequest[];
  server: Server;
}

function reply(req: RecordedRequest): string {
  const last = String(req.body?.messages?.at(-1)?.content ?? req.body?.prompt ?? '');
  if (last.includes('leak a key')) return `Sure, here it is: ${awsKey} - keep it safe.`;
  if (last.includes('share an email')) return 'You can reach Jane at jane.doe@example.org any time.';
  return `You said: ${last}`;
}

async function startProvider(name: string, mode: Mode = 'ok'): Promise<Provider> {
  const key = `sk-provider-${name}`;
  const requests: RecordedRequest[] = [];
  // The fixture answers as OpenAI does and refuses a request without this provider's key (401).
  const ok = openAiHandler({ reply: (r) => `[${name}] ${reply(r)}`, apiKey: key, chunkSize: 8 }, requests);
  const provider: Provider = { name, url: '', key, mode, requests, server: undefined as unknown as Server };
  provider.server = createServer((req: IncomingMessage, res: ServerResponse) => {
    // A working provider: the fixture handler reads, records and answers the request.
    if (provider.mode === 'ok') return ok(req, res);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: JSON.parse(text) });
      if (provider.mode === 'hang') return; // headers never come
      if (provider.mode === 'headers-then-hang') {
        // A stream's headers, then nothing at all (the connection stays open).
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        return;
      }
      if (provider.mode === 'headers-only') {
        // A stream's headers, then the connection drops before its first event.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      if (provider.mode === 'chunked') {
        // JSON without Content-Length: Transfer-Encoding: chunked, in two writes.
        const body = completion(`[${name}] ${reply(requests.at(-1)!)}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(body.slice(0, 20));
        setTimeout(() => res.end(body.slice(20)), 10);
        return;
      }
      if (provider.mode === 'large') {
        // ~100 KiB with its Content-Length: more than the proxy buffers itself (64 KiB), so streamed.
        const body = completion(`[${name}] ${'lorem ipsum '.repeat(8500)}`);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
        return;
      }
      if (provider.mode === 'body-then-hang') {
        // The answer's headers and its first bytes, then nothing (the connection stays open).
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"id":"chatcmpl-1","object":"chat.completion",');
        return;
      }
      if (provider.mode === 'die-mid-stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = {
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'gpt-4o-mini',
          choices: [{ index: 0, delta: { role: 'assistant', content: `[${name}] first words` }, finish_reason: null }],
        };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`, () => setTimeout(() => res.socket?.destroy(), 20));
        return;
      }
      const status = Number(provider.mode);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (provider.retryAfter) headers['retry-after'] = provider.retryAfter;
      res.writeHead(status, headers);
      res.end(JSON.stringify({ error: { message: `${name} says ${status}`, type: 'server_error', code: null } }));
    });
  });
  provider.server.listen(0, '127.0.0.1');
  await once(provider.server, 'listening');
  provider.url = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}/v1`;
  return provider;
}

/** A port nothing listens on: connection refused. */
async function refusedUrl(): Promise<string> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}/v1`;
}

let svc: StartedService;
const maxConcurrent = 12;
const p: Record<string, Provider> = {};
let refused2: string;
const providerKeys: string[] = [];

const tenants = {
  refused: ['gone', 'good'],
  probedDown: ['gone2', 'good'],
  limited: ['limited', 'good'],
  failing: ['failing', 'good'],
  hung: ['hung', 'good'],
  dying: ['dier', 'good'],
  mute: ['mute', 'good'],
  stalled: ['stalled', 'good'],
  allFail: ['gone2', 'failing2'],
  allLimited: ['limited2', 'limited3'],
  mapped: ['failing3', 'mapped'],
  egress: ['failing4', 'good'],
  flaky: ['flaky', 'good'],
  chunked: ['chunky', 'good'],
  large: ['big', 'good'],
  stuck: ['stuck', 'good'],
  stuckAlone: ['stuck2'],
  single: ['good'],
} as const;
const keyOf = (tenant: keyof typeof tenants) => `sk-tenant-${tenant}`;

beforeAll(async () => {
  for (const name of ['good', 'mapped', 'flaky', 'dier']) p[name] = await startProvider(name);
  for (const name of ['failing', 'failing2', 'failing3', 'failing4']) p[name] = await startProvider(name, '503');
  for (const name of ['limited', 'limited2', 'limited3']) p[name] = await startProvider(name, '429');
  p.limited2.retryAfter = '7';
  p.limited3.retryAfter = '3';
  p.hung = await startProvider('hung', 'hang');
  p.gone = await startProvider('gone');
  p.mute = await startProvider('mute', 'headers-only');
  p.stalled = await startProvider('stalled', 'headers-then-hang');
  p.dier.mode = 'die-mid-stream';
  p.chunky = await startProvider('chunky', 'chunked');
  p.big = await startProvider('big', 'large');
  p.stuck = await startProvider('stuck', 'body-then-hang');
  p.stuck2 = await startProvider('stuck2', 'body-then-hang');
  refused2 = await refusedUrl();

  const dir = mkdtempSync(join(tmpdir(), 'failover-'));
  const file = join(dir, 'tenants.yaml');
  const lines = ['tenants:'];
  for (const [id, backend] of Object.entries(tenants)) {
    lines.push(
      `  - id: ${id}`,
      `    backend: [${backend.join(', ')}]`,
      '    policy: default.yaml',
      '    requests_per_minute: 1000',
      '    classifiers: [pii, secrets, prompt_injection]',
      `    api_keys: [{ key: ${keyOf(id as keyof typeof tenants)} }]`,
    );
  }
  writeFileSync(file, `${lines.join('\n')}\n`);

  const env: Record<string, string> = {};
  const set: string[] = [];
  const upstream = (name: string, url: string, timeoutMs: number, extra = '') => {
    env[`KEY_${name.toUpperCase()}`] = p[name]?.key ?? `sk-provider-${name}`;
    set.push(
      `upstreams.${name}={kind: openai, url: "${url}", api_key_env: KEY_${name.toUpperCase()}, timeout_ms: ${timeoutMs}${extra}}`,
    );
  };
  for (const name of Object.keys(p)) {
    if (name === 'mapped') upstream(name, p[name].url, 5000, ', model_map: { gpt-4o-mini: provider-mini-2024 }');
    else if (name === 'gone') upstream(name, p[name].url, 5000, ', health_check: { interval_ms: 600000 }');
    else upstream(name, p[name].url, name === 'hung' ? 300 : name === 'stuck2' ? 800 : 5000);
  }
  upstream('gone2', refused2, 5000);
  // A stream's first byte is awaited 1 s on the chat route here (default 120 s).
  const chatRoute = (
    parse(readFileSync('configs/safety-filter.yaml', 'utf8')) as {
      routes: Array<{ pipeline: Array<Record<string, unknown>> }>;
    }
  ).routes[0]!;
  const proxyAt = chatRoute.pipeline.findIndex((stage) => 'proxy' in stage);
  set.push(`routes.0.pipeline.${proxyAt}.proxy.first_byte_timeout_ms=1000`);
  // As few request slots as the attacker of issue 29 found (12): stuck requests would fill them.
  set.push(`limits.max_concurrent=${maxConcurrent}`);
  // The provider keys come from the environment (api_key_env), as an operator would set them.
  Object.assign(process.env, env);
  providerKeys.push(...Object.keys(env));
  svc = await startService('configs/safety-filter.yaml', {
    env: {
      ...env,
      FILTER_BACKEND_URL: p.good.url,
      FILTER_TENANTS_FILE: file,
      FILTER_ADMIN_TOKEN: adminToken,
      FILTER_AUDIT_PATH: join(dir, 'audit.db'),
    },
    set,
  });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  for (const k of providerKeys) delete process.env[k];
  for (const provider of Object.values(p)) {
    provider.server.closeAllConnections();
    if (provider.server.listening) await new Promise((resolve) => provider.server.close(resolve));
  }
});

function chat(tenant: keyof typeof tenants, content: string, extra: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${svc.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${keyOf(tenant)}` },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], ...extra }),
  });
}

interface AuditRecord {
  request_id: string;
  tenant: string;
  action: string;
  rule: string;
  details: { provider?: string; failover?: Array<{ upstream: string; reason: string; status?: number }> };
}

async function auditOf(requestId: string | null): Promise<AuditRecord[]> {
  const res = await fetch(`${svc.url}/audit?limit=1000`, { headers: { 'x-admin-token': adminToken } });
  const body = (await res.json()) as { records: AuditRecord[] };
  return body.records.filter((r) => r.request_id === requestId);
}

describe('failover before the answer starts', () => {
  it('first provider down (connection refused): the second serves; header and audit name it', async () => {
    // It was up when the filter started (its probe saw it up, and probes again in minutes): it dies now.
    p.gone.server.closeAllConnections();
    await new Promise((resolve) => p.gone.server.close(resolve));
    const res = await chat('refused', 'hello there');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    expect((await res.json()).choices[0].message.content).toBe('[good] You said: hello there');
    const records = await auditOf(res.headers.get('x-filter-request-id'));
    expect(records.length).toBeGreaterThan(0);
    for (const r of records) {
      expect(r.tenant).toBe('refused');
      expect(r.details.provider).toBe('good');
      expect(r.details.failover).toEqual([{ upstream: 'gone', reason: 'connect' }]);
    }
  });

  it('first provider answers 429: the second serves (429s are retried elsewhere)', async () => {
    const before = p.limited.requests.length;
    const res = await chat('limited', 'hello');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    expect(p.limited.requests.length).toBe(before + 1);
    const [record] = await auditOf(res.headers.get('x-filter-request-id'));
    expect(record?.details.failover).toEqual([{ upstream: 'limited', reason: 'status', status: 429 }]);
  });

  it('first provider answers 503: the second serves, streamed too', async () => {
    const res = await chat('failing', 'stream me', { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    const text = await res.text();
    expect(text).toContain('data: [DONE]');
    expect(text).toContain('[good]');
    const [record] = await auditOf(res.headers.get('x-filter-request-id'));
    expect(record?.details).toMatchObject({
      provider: 'good',
      failover: [{ upstream: 'failing', reason: 'status', status: 503 }],
    });
  });

  it('first provider hangs past its timeout: the second serves', async () => {
    const res = await chat('hung', 'anyone there?');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    const [record] = await auditOf(res.headers.get('x-filter-request-id'));
    expect(record?.details.failover).toEqual([{ upstream: 'hung', reason: 'timeout' }]);
  });

  it('a provider that dies after its stream started is not failed over: the client gets the error', async () => {
    const goodBefore = p.good.requests.length;
    const res = await chat('dying', 'tell me a story', { stream: true });
    // The stream was the provider's once its headers came: it is never replayed elsewhere.
    expect(res.headers.get('x-filter-provider')).toBe('dier');
    // Released as it came (the egress check holds back only what could still become a match), the
    // answer's start may have reached the client: then the cut is the client's error (the
    // connection ends without [DONE], or is cut), never a replay from another provider.
    const text = await res.text().catch((err: Error) => `(cut: ${err.message})`);
    if (res.status === 200) expect(text).not.toContain('[DONE]');
    else {
      // The egress check held the first words back: the cut-short answer is refused whole.
      expect(res.status).toBe(502);
      expect(JSON.parse(text).error.type).toBe('backend_error');
    }
    expect(text).not.toContain('[good]');
    expect(p.good.requests.length).toBe(goodBefore);
    expect(p.dier.requests).toHaveLength(1);
  });

  it('a stream that drops before its first event gave the client nothing: the next provider serves', async () => {
    const res = await chat('mute', 'stream me', { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    const text = await res.text();
    expect(text).toContain('[good]');
    expect(text).toContain('data: [DONE]');
    const [record] = await auditOf(res.headers.get('x-filter-request-id'));
    expect(record?.details.failover).toEqual([{ upstream: 'mute', reason: 'broken' }]);
  });

  it('a stream whose headers came but no byte within first_byte_timeout_ms: the next provider serves', async () => {
    const res = await chat('stalled', 'stream me', { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    expect(await res.text()).toContain('data: [DONE]');
    const [record] = await auditOf(res.headers.get('x-filter-request-id'));
    expect(record?.details.failover).toEqual([{ upstream: 'stalled', reason: 'timeout' }]);
  });

  it('a provider its health probe sees down is tried after the others (no failed try per request)', async () => {
    // `gone2` never listened: its first probe found it down.
    const res = await chat('probedDown', 'hello');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    expect(await auditOf(res.headers.get('x-filter-request-id'))).toEqual([]);
  });

  it('every provider fails: 502 backend_error in the OpenAI shape, naming the providers tried', async () => {
    const res = await chat('allFail', 'hello');
    expect(res.status).toBe(502);
    expect(res.headers.get('x-filter-provider')).toBeNull();
    const body = await res.json();
    expect(body.error).toMatchObject({ type: 'backend_error' });
    expect(body.error.message).toEqual(expect.any(String));
    const tried = body.error.details.providers as Array<{ upstream: string }>;
    expect(tried.map((t) => t.upstream).sort()).toEqual(['failing2', 'gone2']);
    expect(JSON.stringify(body)).not.toContain('sk-provider');
    const records = await auditOf(res.headers.get('x-filter-request-id'));
    expect(records.length).toBeGreaterThan(0);
    expect(records[0]?.details.failover).toHaveLength(2);
  });

  it('every provider rate limited: 429 rate_limit_exceeded with the soonest Retry-After', async () => {
    const res = await chat('allLimited', 'hello');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('3');
    expect((await res.json()).error.type).toBe('rate_limit_exceeded');
  });
});

describe('each provider gets its own request', () => {
  it("model names are mapped per provider and each gets its own key, never the client's", async () => {
    const sdk = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: keyOf('mapped'), maxRetries: 0 });
    const { data, response } = await sdk.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'map me' }] })
      .withResponse();
    expect(response.headers.get('x-filter-provider')).toBe('mapped');
    expect(data.choices[0].message.content).toBe('[mapped] You said: map me');
    // The answer's model is the provider's (as it answered).
    expect(data.model).toBe('provider-mini-2024');

    const first = p.failing3.requests.at(-1);
    expect(first?.body.model).toBe('gpt-4o-mini'); // no map for it: the client's name
    expect(first?.headers.authorization).toBe(`Bearer ${p.failing3.key}`);
    const second = p.mapped.requests.at(-1);
    expect(second?.body.model).toBe('provider-mini-2024');
    expect(second?.body.messages).toEqual([{ role: 'user', content: 'map me' }]);
    expect(second?.headers.authorization).toBe(`Bearer ${p.mapped.key}`);
    for (const provider of Object.values(p)) {
      for (const r of provider.requests) expect(JSON.stringify(r.headers)).not.toContain('sk-tenant-');
    }
  });

  it('egress checks apply to the failover provider: a leaked key is blocked, an email masked', async () => {
    const leak = await chat('egress', 'please leak a key');
    expect(leak.status).toBe(400);
    expect((await leak.json()).error).toMatchObject({ code: 'POLICY_BLOCK', rule: 'block-secrets-in-answer' });
    const [block] = (await auditOf(leak.headers.get('x-filter-request-id'))).filter((r) => r.action === 'block');
    expect(block?.details).toMatchObject({ provider: 'good', failover: [{ upstream: 'failing4', status: 503 }] });

    const email = await chat('egress', 'share an email', { stream: true });
    expect(email.status).toBe(200);
    expect(email.headers.get('x-filter-provider')).toBe('good');
    const text = await email.text();
    expect(text).not.toContain('jane.doe@example.org');
    expect(text).toContain('[EMAIL]');
  });

  it('a single backend answers as before, and names itself', async () => {
    const res = await chat('single', 'hi');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('good');
    // No failover: an allow is not on record (record: non-allow).
    expect(await auditOf(res.headers.get('x-filter-request-id'))).toEqual([]);
  });
});

describe('a failing provider leaves the front of the line, and comes back', () => {
  it('is tried after the others while it cools down (its Retry-After), then first again', async () => {
    p.flaky.mode = '429';
    p.flaky.retryAfter = '1';
    const first = await chat('flaky', 'one');
    expect(first.headers.get('x-filter-provider')).toBe('good');
    expect(p.flaky.requests.length).toBe(1);

    // Cooling down: the next request goes to the healthy provider first, without a failed try.
    p.flaky.mode = 'ok';
    const second = await chat('flaky', 'two');
    expect(second.headers.get('x-filter-provider')).toBe('good');
    expect(p.flaky.requests.length).toBe(1);
    expect(await auditOf(second.headers.get('x-filter-request-id'))).toEqual([]);

    await sleep(1100);
    const third = await chat('flaky', 'three');
    expect(third.headers.get('x-filter-provider')).toBe('flaky');
    expect((await third.json()).choices[0].message.content).toBe('[flaky] You said: three');
  });
});

describe('provider lists deliver any framing, and never hold a request slot', () => {
  it('a JSON answer without Content-Length (chunked) is delivered whole', async () => {
    const res = await chat('chunked', 'chunks please');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('chunky');
    expect((await res.json()).choices[0].message.content).toBe('[chunky] You said: chunks please');
  });

  it('a ~100 KiB answer with Content-Length (streamed by the proxy) is delivered whole', async () => {
    const res = await chat('large', 'a long one');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-filter-provider')).toBe('big');
    const content = (await res.json()).choices[0].message.content as string;
    expect(content.length).toBe('[big] '.length + 'lorem ipsum '.length * 8500);
  });

  it('clients that leave while a provider stalls mid-answer release their slots', async () => {
    const before = p.stuck.requests.length;
    const clients = Array.from({ length: maxConcurrent }, () => new AbortController());
    const pending = clients.map((c) =>
      fetch(`${svc.url}/v1/chat/completions`, {
        method: 'POST',
        signal: c.signal,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keyOf('stuck')}` },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }),
      }).catch((err: Error) => err),
    );
    // Every slot is taken by a request whose answer started and stalled.
    await waitFor(() => p.stuck.requests.length - before === maxConcurrent);
    expect((await fetch(`${svc.url}/health`)).status).toBe(503);
    for (const c of clients) c.abort();
    await Promise.all(pending);
    // The slots come back once the clients are gone: health and every tenant answer again.
    await waitFor(async () => (await fetch(`${svc.url}/health`)).status === 200);
    const res = await chat('single', 'still there?');
    expect(res.status).toBe(200);
  });

  it('a provider that stalls mid-answer while the client waits: refused at its timeout, slot released', async () => {
    const res = await chat('stuckAlone', 'hello');
    // The OpenAI dialect answers every backend failure 502 backend_error; the message says which.
    expect(res.status).toBe(502);
    const body = await res.json();
    expect(body.error).toMatchObject({ type: 'backend_error', details: { upstream: 'stuck2', timeout_ms: 800 } });
    expect(body.error.message).toContain('whole answer within 800 ms');
    await waitFor(async () => (await inFlight()) === 0);
  });
});

/** Polls until `check` holds (bounded: 10 s). */
async function waitFor(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error('condition not reached within 10 s');
}

/** `switchyard_requests_in_flight` of the service, read from its metrics listener. */
async function inFlight(): Promise<number> {
  const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('switchyard_requests_in_flight'));
  return Number(line?.split(' ').at(-1));
}
