import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AIAbortError,
  AIConfigError,
  AIHttpError,
  AINetworkError,
  AIResponseError,
  AIService,
  AITimeoutError,
  CACHE_PREFIX,
  MemoryStorage,
  ResponseCache,
} from '../../lib/ai-client/index.ts';
import { cannedAnswer, type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';

let backend: OpenAiBackend;
beforeAll(async () => {
  backend = await startOpenAiBackend({ apiKey: 'sk-test-key', reply: (r) => `echo:${r.body.messages.at(-1).content}` });
});
afterAll(() => backend?.close());

function client(config = {}, options: ConstructorParameters<typeof AIService>[1] = {}) {
  return new AIService(
    { provider: 'custom', baseUrl: backend.url, model: 'gpt-4o-mini', apiKey: 'sk-test-key', ...config },
    { storage: new MemoryStorage(), buildTime: {}, cache: false, ...options },
  );
}

describe('chat completions on the wire', () => {
  it('POSTs {baseUrl}/chat/completions with Bearer key, model, systemPrompt first, max_tokens, temperature', async () => {
    const s = client({ systemPrompt: 'You are terse.', maxTokens: 77, temperature: 0.25 });
    const before = backend.requests.length;
    const result = await s.chat([{ role: 'user', content: 'hello' }]);
    expect(result).toMatchObject({ content: 'echo:hello', model: 'gpt-4o-mini', finishReason: 'stop', cached: false });
    expect(result.usage?.totalTokens).toBeGreaterThan(0);
    const request = backend.requests[before];
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/v1/chat/completions');
    expect(request.headers.authorization).toBe('Bearer sk-test-key');
    expect(request.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'hello' },
      ],
      max_tokens: 77,
      temperature: 0.25,
    });
  });

  it('sends no system message when systemPrompt is empty, accepts a trailing slash, asks for JSON mode', async () => {
    const s = client({ baseUrl: `${backend.url}/` });
    const before = backend.requests.length;
    await s.chat([{ role: 'user', content: 'x' }], { responseFormat: 'json_object', maxTokens: 5 });
    const request = backend.requests[before];
    expect(request.path).toBe('/v1/chat/completions');
    expect(request.body.messages).toEqual([{ role: 'user', content: 'x' }]);
    expect(request.body.response_format).toEqual({ type: 'json_object' });
    expect(request.body.max_tokens).toBe(5);
  });

  it('uses the runtime update for the next request', async () => {
    const s = client();
    s.updateConfig({ model: 'gpt-3.5-turbo' });
    const before = backend.requests.length;
    await s.chat([{ role: 'user', content: 'x' }]);
    expect(backend.requests[before].body.model).toBe('gpt-3.5-turbo');
  });
});

describe('typed errors', () => {
  it('HTTP errors are AIHttpError with status, provider type and code, and no key in the message', async () => {
    const err = await client({ apiKey: 'sk-wrong-key-0123' })
      .chat([{ role: 'user', content: 'x' }])
      .catch((e) => e);
    expect(err).toBeInstanceOf(AIHttpError);
    expect(err).toMatchObject({ kind: 'http', status: 401, code: 'invalid_api_key', type: 'invalid_request_error' });
    expect(err.message).toMatch(/^Provider answered HTTP 401: Incorrect API key provided/);
    expect(err.message).not.toContain('sk-wrong-key-0123');
  });

  it.each([429, 500, 503])('HTTP %i', async (status) => {
    const err = await client({ model: `error-${status}` })
      .chat([{ role: 'user', content: 'x' }])
      .catch((e) => e);
    expect(err).toBeInstanceOf(AIHttpError);
    expect(err.status).toBe(status);
    if (status === 429) expect(err.retryAfterSeconds).toBe(1);
  });

  it('a slow provider is an AITimeoutError', async () => {
    const slow = await startOpenAiBackend({ firstTokenDelayMs: 2000 });
    try {
      const err = await client({ baseUrl: slow.url, apiKey: '' })
        .chat([{ role: 'user', content: 'x' }], { timeoutMs: 100 })
        .catch((e) => e);
      expect(err).toBeInstanceOf(AITimeoutError);
      expect(err).toMatchObject({ kind: 'timeout', timeoutMs: 100 });
    } finally {
      await slow.close();
    }
  });

  it("the caller's AbortSignal gives an AIAbortError", async () => {
    const slow = await startOpenAiBackend({ firstTokenDelayMs: 2000 });
    try {
      const controller = new AbortController();
      const pending = client({ baseUrl: slow.url, apiKey: '' }).chat([{ role: 'user', content: 'x' }], {
        signal: controller.signal,
      });
      setTimeout(() => controller.abort(), 50);
      const err = await pending.catch((e) => e);
      expect(err).toBeInstanceOf(AIAbortError);
      expect(err.kind).toBe('aborted');
    } finally {
      await slow.close();
    }
  });

  it('an unreachable provider is an AINetworkError', async () => {
    // A port that was free a moment ago: nothing listens there.
    const server = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const port = (server.address() as AddressInfo).port;
    await new Promise((r) => server.close(r));
    const err = await client({ baseUrl: `http://127.0.0.1:${port}/v1` })
      .chat([{ role: 'user', content: 'x' }])
      .catch((e) => e);
    expect(err).toBeInstanceOf(AINetworkError);
    expect(err.message).toContain(`http://127.0.0.1:${port}`);
  });

  it('an answer that is not a completion is an AIResponseError', async () => {
    const server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.url?.includes('html') ? '<html>' : JSON.stringify({ choices: [] }));
    }).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      for (const path of ['/html', '/empty']) {
        const err = await client({ baseUrl: base + path })
          .chat([{ role: 'user', content: 'x' }])
          .catch((e) => e);
        expect(err).toBeInstanceOf(AIResponseError);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('a config that cannot make a request is an AIConfigError', async () => {
    await expect(client({ baseUrl: 'nope' }).chat([{ role: 'user', content: 'x' }])).rejects.toBeInstanceOf(
      AIConfigError,
    );
    await expect(client({ model: '' }).chat([{ role: 'user', content: 'x' }])).rejects.toThrow('model is not set');
  });
});

describe('response cache', () => {
  it('answers a repeated request from ext_cache_* without calling the provider', async () => {
    const storage = new MemoryStorage();
    const s = client({}, { storage, cache: {} });
    const before = backend.requests.length;
    const first = await s.chat([{ role: 'user', content: 'cache me' }]);
    const second = await s.chat([{ role: 'user', content: 'cache me' }]);
    expect(first.cached).toBe(false);
    expect(second).toEqual({ ...first, cached: true });
    expect(backend.requests.length).toBe(before + 1);
    const keys = storage.keys().filter((k) => k.startsWith(CACHE_PREFIX));
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^ext_cache_[0-9a-f]{64}$/);
    // The key is not in the cache entry either.
    expect(storage.getItem(keys[0])).not.toContain('sk-test-key');
    // A different parameter is a different request; cache: false bypasses the cache.
    await s.chat([{ role: 'user', content: 'cache me' }], { temperature: 0 });
    await s.chat([{ role: 'user', content: 'cache me' }], { cache: false });
    expect(backend.requests.length).toBe(before + 3);
    // Another service on the same storage (a reload) sees the cached answer.
    const again = await client({}, { storage, cache: {} }).chat([{ role: 'user', content: 'cache me' }]);
    expect(again.cached).toBe(true);
    s.clearCache();
    expect(s.cacheStats()).toEqual({ entries: 0, chars: 0 });
  });

  it('errors are not cached', async () => {
    const storage = new MemoryStorage();
    const s = client({ model: 'error-500' }, { storage, cache: {} });
    await expect(s.chat([{ role: 'user', content: 'x' }])).rejects.toBeInstanceOf(AIHttpError);
    expect(s.cacheStats().entries).toBe(0);
  });
});

describe('ResponseCache bounds', () => {
  it('expires entries after ttlMs', () => {
    let now = 1_000;
    const storage = new MemoryStorage();
    const cache = new ResponseCache<string>(storage, { ttlMs: 500 }, () => now);
    cache.set(`${CACHE_PREFIX}a`, 'A');
    now += 499;
    expect(cache.get(`${CACHE_PREFIX}a`)).toBe('A');
    now += 1;
    expect(cache.get(`${CACHE_PREFIX}a`)).toBeUndefined();
    expect(storage.keys()).toEqual([]);
  });

  it('keeps at most maxEntries, dropping expired entries first, then the oldest', () => {
    let now = 0;
    const storage = new MemoryStorage();
    storage.setItem('ext_config', '{}');
    const cache = new ResponseCache<number>(storage, { maxEntries: 3, ttlMs: 100 }, () => now);
    for (const n of [1, 2, 3]) {
      now += 10;
      cache.set(`${CACHE_PREFIX}${n}`, n);
    }
    now += 10;
    cache.set(`${CACHE_PREFIX}4`, 4);
    expect(cache.get(`${CACHE_PREFIX}1`)).toBeUndefined();
    expect([2, 3, 4].map((n) => cache.get(`${CACHE_PREFIX}${n}`))).toEqual([2, 3, 4]);
    // Entry 2 (stored at 20) expires at 120; at 125 writing 5 drops it rather than 3.
    now = 125;
    cache.set(`${CACHE_PREFIX}5`, 5);
    expect(storage.keys().sort()).toEqual([`${CACHE_PREFIX}3`, `${CACHE_PREFIX}4`, `${CACHE_PREFIX}5`, 'ext_config']);
  });

  it('keeps the total size under maxChars and refuses an entry larger than the budget', () => {
    let now = 0;
    const storage = new MemoryStorage();
    const cache = new ResponseCache<string>(storage, { maxChars: 400 }, () => now++);
    for (let n = 0; n < 10; n++) cache.set(`${CACHE_PREFIX}${n}`, 'x'.repeat(60));
    const stats = cache.stats();
    expect(stats.chars).toBeLessThanOrEqual(400);
    expect(stats.entries).toBeGreaterThan(1);
    expect(cache.get(`${CACHE_PREFIX}9`)).toBe('x'.repeat(60));
    expect(cache.set(`${CACHE_PREFIX}big`, 'y'.repeat(500))).toBe(false);
    expect(cache.get(`${CACHE_PREFIX}big`)).toBeUndefined();
    // Storage quota errors do not throw: the answer is just not cached.
    storage.setItem = () => {
      throw new Error('QuotaExceededError');
    };
    expect(cache.set(`${CACHE_PREFIX}q`, 'z')).toBe(false);
  });

  it('drops damaged entries', () => {
    const storage = new MemoryStorage();
    storage.setItem(`${CACHE_PREFIX}bad`, 'not json');
    const cache = new ResponseCache<string>(storage);
    expect(cache.get(`${CACHE_PREFIX}bad`)).toBeUndefined();
    expect(storage.keys()).toEqual([]);
  });
});

it('cannedAnswer is what the fixture says without a reply function', async () => {
  const plain = await startOpenAiBackend();
  try {
    const s = new AIService(
      { provider: 'local', baseUrl: plain.url, model: 'm' },
      { storage: new MemoryStorage(), buildTime: {}, cache: false },
    );
    expect((await s.chat([{ role: 'user', content: 'hi' }])).content).toBe(cannedAnswer);
  } finally {
    await plain.close();
  }
});
