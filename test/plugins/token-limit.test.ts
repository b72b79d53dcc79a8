/**
 * The `token-limit` stage in a real service (tenant-auth, rate-limit, token-limit, proxy) in
 * front of the OpenAI-compatible fixture backend, whose `usage` each test sets: a reservation
 * that does not fit is refused, a settle refunds what the answer did not use, streamed answers'
 * usage is read (and its chunk stripped when the client did not ask for it), the token headers
 * are sent, and cached and reasoning tokens are counted in /metrics. Driven by fetch (headers and
 * raw SSE) and by the official `openai` SDK.
 */
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import {
  cannedAnswer,
  type OpenAiBackend,
  type OpenAiBackendOptions,
  type RecordedRequest,
  startOpenAiBackend,
} from '../helpers/openai-backend.ts';
import { writeServiceFile } from '../helpers/services.ts';

/** What the backend reports as usage (null: none); tests change it. */
let reported: Record<string, unknown> | null = { prompt_tokens: 5, completion_tokens: 5 };
/** The backend's behaviour, switched by tests. */
const behaviour: OpenAiBackendOptions = { chunkSize: 8, usage: () => reported };

let backend: OpenAiBackend;
let svc: StartedService;

const serviceYaml = `
service: tokens-test
listen: { port: 0 }
metrics: { port: 0, path: /metrics }
dialect: openai
upstreams:
  llm: { kind: openai, url: "\${BACKEND_URL}" }
resources:
  tenants:
    type: tenant-directory
    tenants:
      - { id: small, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 300, api_keys: [{ key: sk-small }] }
      - { id: refund, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 300, api_keys: [{ key: sk-refund }] }
      - { id: streams, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-streams }] }
      - { id: usage, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-usage }] }
      - { id: abort, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-abort }] }
      - { id: plain, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-plain }] }
      - { id: unlimited, backend: llm, policy: default.yaml, requests_per_minute: 10000, api_keys: [{ key: sk-unlimited }] }
      - { id: caps, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-caps }] }
      - { id: embeds, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 1000, api_keys: [{ key: sk-embeds }] }
      - { id: floor, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-floor }] }
      - { id: bound, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 1000, api_keys: [{ key: sk-bound }] }
      - { id: silent, backend: llm, policy: default.yaml, requests_per_minute: 10000, tokens_per_minute: 100000, api_keys: [{ key: sk-silent }] }
  limits: { type: rate-limiter, limit: 10000, window_seconds: 60 }
routes:
  - match: { method: POST, path: /v1/chat/completions }
    pipeline:
      - tenant-auth: { tenants: tenants }
      - rate-limit: { limiter: limits, key: caller, limit_from: caller.attributes.requests_per_minute }
      - token-limit: &tokens { limiter: limits, key: caller, limit_from: caller.attributes.tokens_per_minute, default_completion_tokens: 50 }
      - proxy: { upstream: llm, strip_prefix: /v1 }
  - match: { method: POST, path: /plain/v1/chat/completions }
    pipeline:
      - tenant-auth: { tenants: tenants }
      - token-limit: { limiter: limits, key: caller, limit_from: caller.attributes.tokens_per_minute, default_completion_tokens: 50, stream_usage: false }
      - proxy: { upstream: llm, strip_prefix: /plain/v1 }
  - match: { method: POST, path: /v1/completions }
    pipeline:
      - tenant-auth: { tenants: tenants }
      - token-limit: *tokens
      - proxy: { upstream: llm, strip_prefix: /v1 }
  - match: { method: POST, path: /v1/embeddings }
    pipeline:
      - tenant-auth: { tenants: tenants }
      - token-limit: *tokens
      - proxy: { upstream: llm, strip_prefix: /v1 }
  - match: { method: POST, path: /mct/v1/chat/completions }
    pipeline:
      - tenant-auth: { tenants: tenants }
      - token-limit: { limiter: limits, key: caller, limit_from: caller.attributes.tokens_per_minute, default_completion_tokens: 50, cap_field: max_completion_tokens }
      - proxy: { upstream: llm, strip_prefix: /mct/v1 }
  - match: { method: POST, path: /nocap/v1/chat/completions }
    pipeline:
      - tenant-auth: { tenants: tenants }
      - token-limit: { limiter: limits, key: caller, limit_from: caller.attributes.tokens_per_minute, default_completion_tokens: 50, cap_field: none }
      - proxy: { upstream: llm, strip_prefix: /nocap/v1 }
`;

beforeAll(async () => {
  backend = await startOpenAiBackend(behaviour);
  svc = await startService(writeServiceFile(serviceYaml), { env: { BACKEND_URL: backend.url } });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await backend?.close();
});

beforeEach(() => {
  reported = { prompt_tokens: 5, completion_tokens: 5 };
});

function chat(key: string, body: Record<string, unknown>, prefix = ''): Promise<Response> {
  return fetch(`${svc.url}${prefix}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello there' }], ...body }),
  });
}

/** The `data:` payloads of an SSE body. */
function events(text: string): string[] {
  return text
    .split('\n\n')
    .map((e) => e.trim())
    .filter((e) => e.startsWith('data:'))
    .map((e) => e.slice(5).trim());
}

function lastRequest(): RecordedRequest {
  return backend.requests.at(-1) as RecordedRequest;
}

describe('reserve and settle', () => {
  it('a request that does not fit is refused in the OpenAI shape with Retry-After; nothing reaches the backend', async () => {
    const before = backend.requests.length;
    const res = await chat('sk-small', { max_tokens: 400 });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(res.headers.get('x-ratelimit-limit-tokens')).toBe('300');
    const body = await res.json();
    expect(body.error).toMatchObject({ type: 'rate_limit_exceeded', code: 'tokens' });
    expect(body.error.details).toMatchObject({ limit: 300, window_seconds: 60 });
    expect(body.error.details.requested).toBeGreaterThan(400);
    expect(body.error.retry_after_seconds).toBeGreaterThanOrEqual(1);
    expect(backend.requests.length).toBe(before);
  });

  it('the settle refunds what the answer did not use: far more requests pass than their estimates allow', async () => {
    // Each request reserves its prompt (about 12 tokens) and max_tokens 100; the answer uses 10.
    // Without the refund 2 would fit in 300 tokens; with it every one of 20 does.
    const remaining: number[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await chat('sk-refund', { max_tokens: 100 });
      expect(res.status).toBe(200);
      await res.json();
      remaining.push(Number(res.headers.get('x-ratelimit-remaining-tokens')));
    }
    // After a whole answer the headers say what is left once settled: 10 tokens a request.
    expect(remaining.slice(0, 3)).toEqual([290, 280, 270]);
    expect(remaining.at(-1)).toBe(100);
    // 100 left: an estimate of about 112 does not fit, a smaller one does.
    expect((await chat('sk-refund', { max_tokens: 100 })).status).toBe(429);
    expect((await chat('sk-refund', { max_tokens: 20 })).status).toBe(200);
  });

  it('an answer larger than its estimate is charged in full', async () => {
    reported = { prompt_tokens: 5, completion_tokens: 200 };
    const res = await chat('sk-small', { max_tokens: 10 });
    expect(res.status).toBe(200);
    await res.json();
    // The first test's refusal took nothing; this answer used 205.
    expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe('95');
  });

  it('a backend error refunds the whole reservation', async () => {
    const before = await chat('sk-usage', { max_tokens: 10 });
    await before.json();
    const left = Number(before.headers.get('x-ratelimit-remaining-tokens'));
    const failed = await chat('sk-usage', { model: 'error-500', max_tokens: 1000 });
    expect(failed.status).toBe(500);
    await failed.text();
    const after = await chat('sk-usage', { max_tokens: 10 });
    await after.json();
    expect(Number(after.headers.get('x-ratelimit-remaining-tokens'))).toBe(left - 10);
  });

  it('headers: request and token limits side by side; OpenAI reset format; none for a tenant without a token limit', async () => {
    const res = await chat('sk-streams', {});
    await res.json();
    expect(res.headers.get('x-ratelimit-limit')).toBe('10000');
    expect(res.headers.get('x-ratelimit-limit-tokens')).toBe('100000');
    expect(Number(res.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(100000);
    expect(res.headers.get('x-ratelimit-reset-tokens')).toMatch(/^(\d+m)?\d+s$/);
    const free = await chat('sk-unlimited', { max_tokens: 1_000_000 });
    expect(free.status).toBe(200);
    await free.json();
    expect(free.headers.get('x-ratelimit-limit-tokens')).toBeNull();
  });
});

describe('streamed answers', () => {
  it('usage is asked from the backend, read, and its chunk stripped when the client did not ask for it', async () => {
    reported = { prompt_tokens: 7, completion_tokens: 13 };
    const first = await chat('sk-streams', { stream: true, max_tokens: 500 });
    const text = await first.text();
    expect(lastRequest().body.stream_options).toEqual({ include_usage: true });
    const data = events(text);
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.length).toBeGreaterThan(2);
    // No usage-only chunk (choices: []) reaches the client.
    expect(chunks.filter((c) => Array.isArray(c.choices) && c.choices.length === 0)).toEqual([]);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe(
      'This is a canned answer from the OpenAI-compatible test backend.',
    );
    // Settled with the usage (20), not the estimate (500 + prompt): the next reservation sees it.
    const limitBefore = Number(first.headers.get('x-ratelimit-remaining-tokens'));
    const next = await chat('sk-streams', { max_tokens: 1 });
    await next.json();
    const settledLeft = Number(next.headers.get('x-ratelimit-remaining-tokens'));
    expect(settledLeft).toBeGreaterThan(limitBefore + 400);
  });

  it('a stream the client abandons is charged its prompt and the text that passed, not its reservation', async () => {
    const controller = new AbortController();
    // A paced model: 2000 characters at 200 a second, far longer than the test waits.
    const res = await fetch(`${svc.url}/v1/chat/completions`, {
      method: 'POST',
      signal: controller.signal,
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-abort' },
      body: JSON.stringify({
        model: 'paced-200-2000-4',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        max_tokens: 1000,
      }),
    });
    expect(res.status).toBe(200);
    const reserved = 100000 - Number(res.headers.get('x-ratelimit-remaining-tokens'));
    expect(reserved).toBeGreaterThan(1000);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    await reader.read().catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    const next = await chat('sk-abort', { max_tokens: 1 });
    await next.json();
    // The small request settled to its usage (10); the abandoned stream to what passed.
    const charged = 100000 - 10 - Number(next.headers.get('x-ratelimit-remaining-tokens'));
    const prompt = countTokens('hi') + 4 + 3;
    const seen = events(first)
      .filter((d) => d.startsWith('{'))
      .map((d) => JSON.parse(d).choices[0]?.delta?.content ?? '')
      .join('');
    expect(charged).toBeGreaterThanOrEqual(prompt + countTokens(seen));
    // Less than the whole answer (2000 characters, which would take 10 s), far less than reserved.
    const whole = 'The quick brown fox jumps over the lazy dog. '.repeat(45).slice(0, 2000);
    expect(charged).toBeLessThan(prompt + countTokens(whole));
  });

  it('with stream_usage off the stream goes upstream as sent (with its cap), and is charged its counted text', async () => {
    const res = await fetch(`${svc.url}/plain/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-plain' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    const data = events(await res.text());
    expect(lastRequest().body.stream_options).toBeUndefined();
    // No cap of its own: the default (50 here) is sent as its cap.
    expect(lastRequest().body.max_tokens).toBe(50);
    expect(data.some((d) => d.includes('"usage"'))).toBe(false);
    const left = Number(res.headers.get('x-ratelimit-remaining-tokens'));
    const prompt = countTokens('hi') + 4 + 3;
    // The window had room for it even at one token per byte: reserved at that bound, uncounted.
    expect(left).toBe(100000 - (Buffer.byteLength('hi') + 4 + 3) - 50);
    await new Promise((r) => setTimeout(r, 50));
    const next = await chat('sk-plain', { max_tokens: 1 });
    await next.json();
    // Settled to the prompt and the answer's text counted with the tokenizer; the small request to its usage (10).
    expect(Number(next.headers.get('x-ratelimit-remaining-tokens'))).toBe(
      100000 - prompt - countTokens(cannedAnswer) - 10,
    );
  });

  it('a request that fits only as counted is counted: refused by one token over, admitted at exactly the budget', async () => {
    const content = 'Please summarise the notes from our weekly planning meeting. '.repeat(4);
    const prompt = countTokens(content) + 4 + 3;
    // At one token per byte it would not fit: it is counted, and its count decides.
    expect(Buffer.byteLength(content) + 4 + 3).toBeGreaterThan(prompt);
    const send = (maxTokens: number) =>
      fetch(`${svc.url}/plain/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bound' },
        body: JSON.stringify({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content }],
          max_tokens: maxTokens,
          stream: true,
        }),
      });
    const over = await send(1000 - prompt + 1);
    expect(over.status).toBe(429);
    expect((await over.json()).error.details).toMatchObject({ requested: 1001, remaining: 1000 });
    const exact = await send(1000 - prompt);
    expect(exact.status).toBe(200);
    expect(exact.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    await exact.text();
  });

  it('a client that asked for usage gets the usage chunk, as the backend sent it', async () => {
    reported = { prompt_tokens: 7, completion_tokens: 13 };
    const res = await chat('sk-streams', { stream: true, stream_options: { include_usage: true } });
    const chunks = events(await res.text())
      .slice(0, -1)
      .map((d) => JSON.parse(d));
    expect(lastRequest().body.stream_options).toEqual({ include_usage: true });
    const last = chunks.at(-1);
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 7, completion_tokens: 13, total_tokens: 20 });
  });

  it('the official openai SDK streams without a usage chunk, and sees a 429 as RateLimitError with code tokens', async () => {
    const sdk = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: 'sk-streams', maxRetries: 0 });
    const stream = await sdk.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'stream please' }],
      stream: true,
      max_tokens: 64,
    });
    let text = '';
    let usageChunks = 0;
    for await (const chunk of stream) {
      if (chunk.usage) usageChunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    expect(text).toBe('This is a canned answer from the OpenAI-compatible test backend.');
    expect(usageChunks).toBe(0);
    const small = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: 'sk-small', maxRetries: 0 });
    const err = await small.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('tokens');
  });
});

describe('caps: a request without one is bounded by the budget', () => {
  const prompt = countTokens('hello there') + 4 + 3;

  it('gets the cap in max_tokens by default, in max_completion_tokens or none as configured; a client’s own cap passes as sent', async () => {
    const left = async (res: Response) => {
      await res.json();
      return Number(res.headers.get('x-ratelimit-remaining-tokens'));
    };
    // Settled answers use 10 each (the backend's usage): what is left before each request is known.
    let before = 100000;
    const plain = await chat('sk-caps', {});
    expect(lastRequest().body).toMatchObject({ max_tokens: 50 });
    expect(lastRequest().body.max_completion_tokens).toBeUndefined();
    before = await left(plain);
    expect(before).toBe(100000 - 10);

    await left(await chat('sk-caps', {}, '/mct'));
    expect(lastRequest().body).toMatchObject({ max_completion_tokens: 50 });
    expect(lastRequest().body.max_tokens).toBeUndefined();

    const none = await chat('sk-caps', {}, '/nocap');
    expect(lastRequest().body.max_tokens).toBeUndefined();
    expect(lastRequest().body.max_completion_tokens).toBeUndefined();
    // Reserved all the same: the prompt and the default.
    await none.json();

    // The cap is per choice: n choices reserve n times it.
    const two = await chat('sk-caps', { n: 2 });
    expect(lastRequest().body).toMatchObject({ max_tokens: 50, n: 2 });
    await two.json();

    const own = await chat('sk-caps', { max_completion_tokens: 7 });
    expect(lastRequest().body.max_completion_tokens).toBe(7);
    expect(lastRequest().body.max_tokens).toBeUndefined();
    await own.json();

    // A legacy completion gets max_tokens.
    const legacy = await fetch(`${svc.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-caps' },
      body: JSON.stringify({ model: 'gpt-3.5-turbo-instruct', prompt: 'say hi' }),
    });
    expect(legacy.status).toBe(200);
    expect(lastRequest().body.max_tokens).toBe(50);
    await legacy.json();
  });

  it('under the floor (here the default: min_completion_tokens is larger) a request without a cap is refused with the budget', async () => {
    // One answer reports all but prompt + 20 tokens of the 100,000.
    reported = { prompt_tokens: 10, completion_tokens: 100_000 - prompt - 20 - 10 };
    const big = await chat('sk-floor', { max_tokens: 60 });
    await big.json();
    expect(Number(big.headers.get('x-ratelimit-remaining-tokens'))).toBe(prompt + 20);
    reported = { prompt_tokens: 5, completion_tokens: 5 };
    const before = backend.requests.length;
    const refused = await chat('sk-floor', {});
    expect(refused.status).toBe(429);
    const body = await refused.json();
    expect(body.error.message).toMatch(new RegExp(`Token budget exhausted: ${prompt + 20} of 100000 tokens left`));
    expect(body.error.details).toMatchObject({ remaining: prompt + 20, requested: prompt + 50 });
    expect(backend.requests.length).toBe(before);
    // A request with its own small cap still fits.
    expect((await chat('sk-floor', { max_tokens: 20 })).status).toBe(200);
  });
});

describe('embeddings', () => {
  it('reserve their input tokens (strings counted, token ids by number) and settle with the usage', async () => {
    const input = ['the quick brown fox', 'jumps over the lazy dog'];
    const res = await fetch(`${svc.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-embeds' },
      body: JSON.stringify({ model: 'text-embedding-3-small', input }),
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    // Nothing generated: no cap is added.
    expect(lastRequest().body.max_tokens).toBeUndefined();
    expect(Number(res.headers.get('x-ratelimit-remaining-tokens'))).toBe(1000 - body.usage.total_tokens);
    const ids = await fetch(`${svc.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-embeds' },
      body: JSON.stringify({ model: 'text-embedding-3-small', input: Array.from({ length: 2000 }, (_, i) => i) }),
    });
    // 2,000 token ids: more than the whole limit.
    expect(ids.status).toBe(429);
    expect((await ids.json()).error.details.requested).toBe(2000);
  });

  it('an input that spells a special token (<|endoftext|>) is counted as text, not an internal error', async () => {
    const input = 'Documents are separated by <|endoftext|> in the training data. '.repeat(20);
    const res = await fetch(`${svc.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-embeds' },
      body: JSON.stringify({ model: 'text-embedding-3-small', input }),
    });
    // Counted on the service's thread (a short text): it fits, and the answer's usage settles it.
    expect(res.status).toBe(200);
    expect((await res.json()).data).toHaveLength(1);
    expect(Number(res.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(1000);
  });
});

describe('answers without usage', () => {
  const prompt = countTokens('hello there') + 4 + 3;

  async function leftNow(): Promise<number> {
    const res = await chat('sk-silent', { max_tokens: 1 });
    await res.json();
    return Number(res.headers.get('x-ratelimit-remaining-tokens'));
  }

  it('a whole answer read here is charged its prompt and its text counted with the tokenizer', async () => {
    const before = await leftNow();
    reported = null;
    const res = await chat('sk-silent', { max_tokens: 30 });
    const body = await res.json();
    expect(body.usage).toBeUndefined();
    // The headers say what is left once settled: the prompt and the answer's text, not the estimate (prompt + 30).
    expect(Number(res.headers.get('x-ratelimit-remaining-tokens'))).toBe(before - prompt - countTokens(cannedAnswer));
  });

  it('a whole answer no stage can read (no Content-Length, nothing after this stage reads it) keeps its estimate', async () => {
    const before = await leftNow();
    reported = null;
    behaviour.chunkedJson = true;
    try {
      const res = await chat('sk-silent', { max_tokens: 30 });
      expect(res.status).toBe(200);
      expect((await res.json()).usage).toBeUndefined();
    } finally {
      behaviour.chunkedJson = false;
    }
    reported = { prompt_tokens: 5, completion_tokens: 5 };
    await new Promise((r) => setTimeout(r, 50));
    // The estimate (prompt + 30) stands; the probe settled to its usage (10).
    expect(await leftNow()).toBe(before - prompt - 30 - 10);
  });
});

describe('metrics', () => {
  it('prompt, completion, cached and reasoning tokens are counted per tenant, streamed answers included', async () => {
    reported = {
      prompt_tokens: 40,
      completion_tokens: 30,
      prompt_tokens_details: { cached_tokens: 32 },
      completion_tokens_details: { reasoning_tokens: 12 },
    };
    await (await chat('sk-usage', {})).json();
    await (await chat('sk-usage', { stream: true })).text();
    // A legacy completion goes through the same stage.
    const completion = await fetch(`${svc.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-usage' },
      body: JSON.stringify({ model: 'gpt-3.5-turbo-instruct', prompt: 'say hi', max_tokens: 5 }),
    });
    expect(completion.status).toBe(200);
    expect(completion.headers.get('x-ratelimit-limit-tokens')).toBe('100000');
    await completion.json();
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    const value = (kind: string) =>
      Number(
        new RegExp(`^switchyard_tokens_total\\{[^}]*tenant="usage"[^}]*kind="${kind}"[^}]*\\} (\\S+)$`, 'm').exec(
          metrics,
        )?.[1],
      );
    // Earlier tests in this file sent `usage` answers of 5 + 5 tokens (two of them).
    expect(value('cached')).toBe(96);
    expect(value('reasoning')).toBe(36);
    expect(value('prompt')).toBe(3 * 40 + 2 * 5);
    expect(value('completion')).toBe(3 * 30 + 2 * 5);
    expect(metrics).toMatch(/switchyard_token_limit_decisions_total\{[^}]*decision="limited"/);
  });
});
