/**
 * OpenTelemetry tracing, end to end: the real typed proxy (stdio MCP upstream) and the real
 * safety filter (fixture OpenAI backend) export to a fixture OTLP/HTTP collector that decodes
 * what it receives. Also the gateway-overhead histogram every service exposes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { startSearxng } from '../fixtures/searxng/searxng.ts';
import { type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';

const typedProxy = join(import.meta.dirname, '../../configs/typed-proxy.yaml');
const safetyFilter = join(import.meta.dirname, '../../configs/safety-filter.yaml');
const searchService = join(import.meta.dirname, '../../configs/search.yaml');
const devKey = 'sk-dev-local-0001';
const SERVER = 2;
const CLIENT = 3;
const INTERNAL = 1;

const traced = (receiver: OtlpReceiver, extra: string[] = []) => [
  'tracing.enabled=true',
  `tracing.endpoint=${receiver.url}`,
  'tracing.export_delay_ms=20',
  ...extra,
];

function rpc(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

function chat(url: string, content: string, headers: Record<string, string> = {}) {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${devKey}`, ...headers },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }),
  });
}

const ofTrace = (spans: ReceivedSpan[], traceId: string) => spans.filter((s) => s.traceId === traceId);
const hasServerSpan = (traceId: string) => (spans: ReceivedSpan[]) =>
  spans.some((s) => s.traceId === traceId && s.kind === SERVER);

/** Follows parent links from `span` up to the root: the chain of span names. */
function ancestry(spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const chain = [span];
  let cur = span;
  while (cur.parentSpanId) {
    const parent = spans.find((s) => s.spanId === cur.parentSpanId);
    if (!parent) break;
    chain.push(parent);
    cur = parent;
  }
  return chain;
}

describe('typed proxy, tracing on (stdio MCP upstream)', () => {
  let receiver: OtlpReceiver;
  let svc: StartedService;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    svc = await startService(typedProxy, { warmupMs: 15000, set: traced(receiver) });
  }, 30_000);
  afterAll(async () => {
    await svc?.close();
    await receiver?.close();
  });

  it('a tools/call is one trace: server span -> stage spans -> client span, continuing the caller traceparent, MCP attributes', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const secret = 'do-not-record-this-argument';
    const res = await rpc(
      svc.url,
      { jsonrpc: '2.0', id: 41, method: 'tools/call', params: { name: 'echo', arguments: { message: secret } } },
      { traceparent: `00-${traceId}-${callerSpan}-01` },
    );
    expect(res.status).toBe(200);
    await res.text();
    const spans = ofTrace(await receiver.waitFor(hasServerSpan(traceId)), traceId);

    const server = spans.find((s) => s.kind === SERVER)!;
    expect(server.parentSpanId).toBe(callerSpan);
    expect(server.service).toBe('typed-proxy');
    expect(server.name).toBe('POST /');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'url.path': '/',
      'http.route': '/',
      'http.response.status_code': 200,
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'echo',
      'jsonrpc.request.id': '41',
    });

    const client = spans.find((s) => s.kind === CLIENT)!;
    expect(client.name).toBe('tools/call everything');
    expect(client.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo' });
    // The client span hangs under the stages, which hang under the server span.
    const chain = ancestry(spans, client);
    expect(chain.at(-1)).toBe(server);
    const stages = chain.slice(1, -1);
    expect(stages.length).toBeGreaterThan(1);
    for (const s of stages) {
      expect(s.kind).toBe(INTERNAL);
      expect(s.attributes['switchyard.route']).toBe(server.attributes['switchyard.route']);
      expect(s.name).toBe(`stage ${s.attributes['switchyard.stage']}`);
    }
    expect(stages.map((s) => s.attributes['switchyard.stage'])).toContain('proxy');
    // No argument, prompt or credential anywhere.
    expect(JSON.stringify(spans)).not.toContain(secret);
  });

  it('a refused request: the server span says the error kind; the refusing stage span names it too', async () => {
    const traceId = 'aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbb';
    const res = await rpc(
      svc.url,
      { jsonrpc: '2.0', id: 'x', method: 'tools/call', params: { name: 'echo', arguments: { msg: 1 } } },
      { traceparent: `00-${traceId}-1111111111111111-01` },
    );
    expect(res.status).toBe(422);
    const spans = ofTrace(await receiver.waitFor(hasServerSpan(traceId)), traceId);
    const server = spans.find((s) => s.kind === SERVER)!;
    expect(server.attributes['error.type']).toBe('validation_failed');
    expect(server.attributes['http.response.status_code']).toBe(422);
    expect(spans.some((s) => s.kind === CLIENT)).toBe(false); // never reached the upstream
    expect(spans.some((s) => s.kind === INTERNAL && s.attributes['error.type'] === 'validation_failed')).toBe(true);
  });
});

describe('safety filter, tracing on (OpenAI backend)', () => {
  let receiver: OtlpReceiver;
  let backend: OpenAiBackend;
  let svc: StartedService;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    backend = await startOpenAiBackend({ firstTokenDelayMs: 300 });
    const dir = mkdtempSync(join(tmpdir(), 'tracing-'));
    svc = await startService(safetyFilter, {
      set: traced(receiver),
      env: { FILTER_BACKEND_URL: backend.url, FILTER_AUDIT_PATH: join(dir, 'audit.db') },
    });
  }, 30_000);
  afterAll(async () => {
    await svc?.close();
    await backend?.close();
    await receiver?.close();
  });

  it('a chat request: GenAI attributes, an HTTP client span, and the backend sees the client span as parent', async () => {
    // A marker no trace may hold. Not "secret-prompt-words": the default tenant's injection model
    // reads "secret prompt" as a prompt-extraction attempt (0.87) and refuses it.
    const prompt = 'tell me about the weather, untraced-marker-words';
    const res = await chat(svc.url, prompt);
    expect(res.status).toBe(200);
    await res.json();
    const sent = backend.requests.at(-1)!;
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(sent.headers.traceparent));
    expect(m).not.toBeNull();
    const [, traceId, parentId] = m!;
    const spans = ofTrace(await receiver.waitFor(hasServerSpan(traceId)), traceId);
    const client = spans.find((s) => s.kind === CLIENT)!;
    expect(client.spanId).toBe(parentId);
    expect(client.attributes).toMatchObject({
      'http.request.method': 'POST',
      'server.address': '127.0.0.1',
      'http.response.status_code': 200,
    });
    expect(String(client.attributes['url.full'])).toMatch(/\/v1\/chat\/completions$/);
    const server = spans.find((s) => s.kind === SERVER)!;
    expect(ancestry(spans, client).at(-1)).toBe(server);
    expect(server.service).toBe('safety-filter');
    expect(server.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'http.route': '/v1/chat/completions',
    });
    expect(server.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    expect(server.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    const text = JSON.stringify(spans);
    expect(text).not.toContain('untraced-marker-words');
    expect(text).not.toContain(devKey);
    expect(receiver.contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
  });

  it('switchyard_gateway_overhead_seconds: present, and smaller than the request duration for a slow upstream', async () => {
    const res = await chat(svc.url, 'a slow one');
    await res.json();
    const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    const sum = (name: string) =>
      Number(
        new RegExp(`^${name}_sum\\{[^}]*route="POST /v1/chat/completions"[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN,
      );
    const count = (name: string) =>
      Number(
        new RegExp(`^${name}_count\\{[^}]*route="POST /v1/chat/completions"[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ??
          NaN,
      );
    const overhead = sum('switchyard_gateway_overhead_seconds');
    const duration = sum('switchyard_request_duration_seconds');
    expect(count('switchyard_gateway_overhead_seconds')).toBe(count('switchyard_request_duration_seconds'));
    expect(overhead).toBeGreaterThan(0);
    // The backend waits 300 ms before each answer: that wait is in the duration and not in the
    // gateway's own share (a bound load cannot break: a busy machine only adds to both).
    expect(duration - overhead).toBeGreaterThanOrEqual(0.3 * count('switchyard_request_duration_seconds') * 0.95);
  });
});

describe('search service, tracing on (SearXNG backend)', () => {
  it('the search backend call is a client span of the request, and the backend sees it as parent', async () => {
    const receiver = await startOtlpReceiver();
    const searx = await startSearxng(() => []);
    const svc = await startService(searchService, {
      set: traced(receiver),
      env: { SEARCH_BACKEND_URL: searx.url, SEARCH_PROCESSOR: 'local', LOG_LEVEL: 'silent' },
      warmupMs: 500,
    });
    try {
      const res = await fetch(`${svc.url}/v1/search?q=${encodeURIComponent('bees secret-query-words')}`);
      expect(res.status).toBe(200);
      await res.json();
      const sent = searx.queries.at(-1)!;
      const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(sent.traceparent));
      expect(m, 'traceparent sent to the search backend').not.toBeNull();
      const [, traceId, parentId] = m!;
      const spans = ofTrace(await receiver.waitFor(hasServerSpan(traceId)), traceId);
      const client = spans.find((s) => s.spanId === parentId)!;
      expect(client.kind).toBe(CLIENT);
      expect(client.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.response.status_code': 200 });
      // The path only: the query string (the user's search) stays out of the trace.
      expect(String(client.attributes['url.full'])).toMatch(/\/search$/);
      expect(JSON.stringify(spans)).not.toContain('secret-query-words');
      expect(ancestry(spans, client).at(-1)!.kind).toBe(SERVER);
    } finally {
      await svc.close();
      await searx.close();
      await receiver.close();
    }
  }, 30_000);
});

describe('sampling 0 and tracing off export nothing', () => {
  let receiver: OtlpReceiver;
  let backend: OpenAiBackend;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    backend = await startOpenAiBackend();
  });
  afterAll(async () => {
    await backend?.close();
    await receiver?.close();
  });

  for (const [label, set] of [
    ['sample_ratio 0', ['tracing.sample_ratio=0']],
    ['tracing off (the default)', null],
  ] as const) {
    it(label, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tracing-'));
      const svc = await startService(safetyFilter, {
        set: set ? traced(receiver, [...set]) : [`tracing.endpoint=${receiver.url}`],
        env: { FILTER_BACKEND_URL: backend.url, FILTER_AUDIT_PATH: join(dir, 'audit.db') },
      });
      try {
        const traceId = 'cccccccccccccccc0000000000000001';
        for (let i = 0; i < 3; i++) expect((await chat(svc.url, `hello ${i}`)).status).toBe(200);
        // An unsampled caller's trace continues unsampled; when tracing is off the id passes as before.
        const res = await chat(svc.url, 'hello', { traceparent: `00-${traceId}-2222222222222222-00` });
        expect(res.status).toBe(200);
        const header = String(backend.requests.at(-1)!.headers.traceparent);
        expect(header).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
      } finally {
        await svc.close(); // flushes whatever was queued
      }
      expect(receiver.spans).toEqual([]);
    });
  }
});

describe('a collector that is down', () => {
  it('costs no request, and the service still stops (the bound on that wait: test/runtime/tracing-config.test.ts)', async () => {
    const backend = await startOpenAiBackend();
    const dir = mkdtempSync(join(tmpdir(), 'tracing-'));
    // A port nothing listens on: a receiver started and closed again.
    const gone = await startOtlpReceiver();
    await gone.close();
    const env = { FILTER_BACKEND_URL: backend.url, FILTER_AUDIT_PATH: join(dir, 'audit.db') };
    try {
      const svc = await startService(safetyFilter, {
        set: ['tracing.enabled=true', `tracing.endpoint=${gone.url}`, 'tracing.export_delay_ms=10'],
        env,
      });
      try {
        for (let i = 0; i < 3; i++) expect((await chat(svc.url, `hello ${i}`)).status).toBe(200);
        await new Promise((r) => setTimeout(r, 100)); // an export attempt fails meanwhile
        expect((await chat(svc.url, 'still fine')).status).toBe(200);
      } finally {
        await svc.close();
      }
    } finally {
      await backend.close();
    }
  });
});
