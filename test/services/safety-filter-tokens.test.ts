/**
 * Token limits through the real safety filter (configs/safety-filter.yaml) in front of the
 * OpenAI-compatible fixture backend, each attack of issue 29 item 7 and its bounded outcome:
 * - a request without max_tokens asking for a 20,000-token answer from a 3,000-token tenant: the
 *   cap sent upstream is what is left of the budget, and the next one is refused with the budget;
 * - a request whose max_tokens exceeds what is left: refused, not lowered, nothing upstream;
 * - a backend that ignores the cap and overshoots (memory and Redis stores): the excess is debt
 *   carried into the next window, which does not start fresh; Retry-After says when it fits;
 * - a backend that reports no usage (whole answers with and without Content-Length, streams):
 *   charged the prompt and the text that passed, counted with the tokenizer, not the estimate;
 * - embeddings: their input tokens are counted in the same budget.
 *
 * Then tokens per minute across gateway processes: two safety-filter processes (configs/safety-filter.yaml,
 * `switchyard serve`, rate-limit store on Redis) in front of one fixture backend whose usage is
 * known (100 tokens an answer), one tenant with 2000 tokens per minute. Waves of concurrent
 * requests, plain and streamed, spread over both processes: the tokens served in the window never
 * exceed the limit by more than one request's estimate, the budget is used (the settle refunds
 * across processes), and the shared count in Redis is exactly what was served. The Redis cases
 * need Redis at 127.0.0.1:6379: required when CI=true, else skipped with the reason shown.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type OpenAiBackend, type OpenAiBackendOptions, startOpenAiBackend } from '../helpers/openai-backend.ts';
import { deleteKeys, REDIS_URL, redisReachable } from '../helpers/redis.ts';
import { until } from '../helpers/servers.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';

const prefix = `switchyard:test:tokens:${randomUUID()}`;
const key = 'sk-tokens-test-0001';
const limit = 2000;
const perAnswer = 100;

let backend: OpenAiBackend;
const gateways: ServiceProcess[] = [];

/** Every tenant below has 3,000 tokens per window; its key is `sk-<id>-0001`. */
const budget = 3000;
const tenantIds = ['capped', 'explicit', 'silent-json', 'silent-chunked', 'silent-stream', 'embed', 'overshoot'];

function writeTenants(): string {
  const dir = mkdtempSync(join(tmpdir(), 'filter-budget-'));
  const file = join(dir, 'tenants.yaml');
  writeFileSync(
    file,
    `tenants:\n${tenantIds
      .map(
        (id) =>
          `  - id: ${id}\n    backend: llm\n    policy: default.yaml\n    requests_per_minute: 100000\n` +
          `    tokens_per_minute: ${budget}\n    classifiers: [pii]\n    api_keys: [{ key: sk-${id}-0001 }]\n`,
      )
      .join('')}`,
  );
  return file;
}

/** What the token-limit stage reserves for one user message's prompt (its tokens, 4 per message, 3 for the reply). */
const promptOf = (content: string) => countTokens(content) + 4 + 3;

async function call(svc: StartedService, tenant: string, path: string, body: Record<string, unknown>) {
  return fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer sk-${tenant}-0001` },
    body: JSON.stringify(body),
  });
}

const chatTo = (svc: StartedService, tenant: string, body: Record<string, unknown>) =>
  call(svc, tenant, '/v1/chat/completions', { model: 'gpt-4o-mini', ...body });

/** The `data:` payloads of an SSE body that are JSON chunks. */
function chunksOf(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .map((e) => e.trim())
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)));
}

interface Refusal {
  status: number;
  retryAfter: number;
  error: {
    type: string;
    code: string;
    message: string;
    retry_after_seconds: number;
    details: { limit: number; requested: number; remaining: number; debt?: number; window_seconds: number };
  };
}

/** A small request that must be refused; its 429 in the OpenAI shape. */
async function refused(svc: StartedService, tenant: string): Promise<Refusal> {
  const res = await chatTo(svc, tenant, { messages: [{ role: 'user', content: 'one more?' }] });
  const body = (await res.json()) as { error: Refusal['error'] };
  return { status: res.status, retryAfter: Number(res.headers.get('retry-after')), error: body.error };
}

describe('the budget bounds what a tenant receives (memory store, 60 s windows)', () => {
  let svc: StartedService;
  let fixture: OpenAiBackend;
  // Switched by the tests: whether the backend stops at the cap, and what usage it reports.
  const behaviour: OpenAiBackendOptions = { chunkSize: 512, honourMaxTokens: true };

  beforeAll(async () => {
    fixture = await startOpenAiBackend(behaviour);
    const dir = mkdtempSync(join(tmpdir(), 'filter-budget-audit-'));
    svc = await startService('configs/safety-filter.yaml', {
      env: {
        FILTER_BACKEND_URL: fixture.url,
        FILTER_TENANTS_FILE: writeTenants(),
        FILTER_AUDIT_PATH: join(dir, 'audit.db'),
        FILTER_RATE_BACKEND: 'memory',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    await fixture?.close();
  });

  it('without max_tokens the cap sent upstream is what is left: a 20,000-token ask gets at most the 3,000 budget, then a 429 with the budget', async () => {
    behaviour.honourMaxTokens = true;
    behaviour.usage = undefined;
    // A first answer of 1,000 tokens (capped by the client itself).
    const first = await chatTo(svc, 'capped', {
      model: 'huge-80000',
      messages: [{ role: 'user', content: 'write a long essay' }],
      max_tokens: 1000,
    });
    expect(first.status).toBe(200);
    const firstUsage = ((await first.json()) as { usage: { total_tokens: number } }).usage;
    const left = Number(first.headers.get('x-ratelimit-remaining-tokens'));
    expect(left).toBe(budget - firstUsage.total_tokens);

    // The attack: no max_tokens, an answer of 80,000 characters (20,000 of the fixture's tokens), streamed.
    const content = 'now write the longest essay you can, 20000 tokens at least';
    const res = await chatTo(svc, 'capped', {
      model: 'huge-80000',
      messages: [{ role: 'user', content }],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    // Everything left was reserved for it: its prompt, and the rest as its cap.
    expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    const forwarded = fixture.requests.at(-1)?.body;
    expect(forwarded.max_tokens).toBe(left - promptOf(content));
    const chunks = chunksOf(await res.text());
    const usage = chunks.at(-1)?.usage as { total_tokens: number; completion_tokens: number };
    expect(usage.completion_tokens).toBe(forwarded.max_tokens);
    const finish = chunks.map((c) => (c.choices as { finish_reason?: string }[])[0]?.finish_reason).find(Boolean);
    expect(finish).toBe('length');
    // What the tenant received in the window: within its budget, not 20,000.
    expect(firstUsage.total_tokens + usage.total_tokens).toBeLessThanOrEqual(budget);

    // The next request without max_tokens: less than its prompt and 64 completion tokens left.
    const before = fixture.requests.length;
    // (The stream settles once it is written: the prompt counted by the backend, not the estimate.)
    const settled = budget - firstUsage.total_tokens - usage.total_tokens;
    await until(async () => (await refused(svc, 'capped')).error.details.remaining === settled, 5000);
    const refusal = await refused(svc, 'capped');
    expect(refusal.status).toBe(429);
    expect(refusal.error).toMatchObject({ type: 'rate_limit_exceeded', code: 'tokens' });
    expect(refusal.error.message).toMatch(/Token budget exhausted: \d+ of 3000 tokens left/);
    expect(refusal.error.message).toMatch(/without max_tokens needs at least/);
    expect(refusal.error.details).toMatchObject({ limit: budget, window_seconds: 60 });
    expect(refusal.error.details.remaining).toBeLessThan(refusal.error.details.requested);
    expect(refusal.retryAfter).toBeGreaterThanOrEqual(1);
    expect(fixture.requests.length).toBe(before);
  });

  it('a request whose max_tokens exceeds what is left is refused, not lowered; without max_tokens it gets what is left', async () => {
    behaviour.honourMaxTokens = true;
    behaviour.usage = undefined;
    const first = await chatTo(svc, 'explicit', {
      model: 'huge-80000',
      messages: [{ role: 'user', content: 'a long answer please' }],
      max_tokens: 2800,
    });
    expect(first.status).toBe(200);
    await first.json();
    const left = Number(first.headers.get('x-ratelimit-remaining-tokens'));
    expect(left).toBeGreaterThan(100);
    expect(left).toBeLessThan(200);

    const before = fixture.requests.length;
    const over = await chatTo(svc, 'explicit', {
      model: 'huge-80000',
      messages: [{ role: 'user', content: 'and another one' }],
      max_tokens: 500,
    });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const body = (await over.json()) as { error: Refusal['error'] };
    expect(body.error.code).toBe('tokens');
    expect(body.error.message).toMatch(/requested \d+, remaining \d+/);
    expect(body.error.details.remaining).toBe(left);
    expect(body.error.details.requested).toBe(promptOf('and another one') + 500);
    // Refused at the gateway: the backend saw nothing.
    expect(fixture.requests.length).toBe(before);

    // Without max_tokens the same request fits: its cap is what is left after its prompt.
    const fits = await chatTo(svc, 'explicit', {
      model: 'huge-80000',
      messages: [{ role: 'user', content: 'and another one' }],
    });
    expect(fits.status).toBe(200);
    const answer = (await fits.json()) as {
      usage: { completion_tokens: number };
      choices: { finish_reason: string }[];
    };
    expect(fixture.requests.at(-1)?.body.max_tokens).toBe(left - promptOf('and another one'));
    expect(answer.usage.completion_tokens).toBe(left - promptOf('and another one'));
    expect(answer.choices[0].finish_reason).toBe('length');
  });

  // A backend that ignores the cap and reports no usage: 40,000 characters of answer each time.
  for (const [tenant, mode] of [
    ['silent-json', 'a whole answer with Content-Length'],
    ['silent-chunked', 'a whole answer without Content-Length (read by the egress policy)'],
    ['silent-stream', 'a stream'],
  ] as const) {
    it(`an answer without usage is charged its prompt and counted text, not the estimate: ${mode}`, async () => {
      behaviour.honourMaxTokens = false;
      behaviour.usage = () => null;
      behaviour.chunkedJson = tenant === 'silent-chunked';
      try {
        const content = 'tell me everything';
        const stream = tenant === 'silent-stream';
        const res = await chatTo(svc, tenant, {
          model: 'huge-40000',
          messages: [{ role: 'user', content }],
          ...(stream ? { stream: true } : {}),
        });
        expect(res.status).toBe(200);
        // The reservation: all 3,000 tokens (its cap was what was left; this backend ignores it).
        expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
        let text: string;
        if (stream) {
          const chunks = chunksOf(await res.text());
          expect(chunks.some((c) => c.usage)).toBe(false);
          text = chunks.map((c) => (c.choices as { delta?: { content?: string } }[])[0]?.delta?.content ?? '').join('');
        } else {
          const answer = (await res.json()) as { usage?: unknown; choices: { message: { content: string } }[] };
          expect(answer.usage).toBeUndefined();
          text = answer.choices[0].message.content;
        }
        expect(text.length).toBe(40000);
        // Charged the prompt and the text (about 8,900 tokens), not the 3,000 estimate: the excess is debt.
        let refusal = await refused(svc, tenant);
        await until(async () => {
          refusal = await refused(svc, tenant);
          return (refusal.error.details.debt ?? 0) > 0;
        }, 5000);
        const charged = budget + (refusal.error.details.debt as number);
        const exact = promptOf(content) + countTokens(text);
        // Counted in slices of 1 KiB cut at spaces (within a few tokens of one whole count), for at
        // most 25 ms of tokenizer time: what a loaded machine leaves is counted at one token per 3
        // bytes (English is about 4.5), never less.
        expect(charged).toBeGreaterThanOrEqual(exact * 0.99);
        expect(charged).toBeLessThanOrEqual(promptOf(content) + Math.ceil(Buffer.byteLength(text) / 3));
        expect(refusal.status).toBe(429);
        expect(refusal.error.details.remaining).toBe(0);
        expect(refusal.error.message).toMatch(/over the limit carried from answers larger than reserved/);
      } finally {
        behaviour.usage = undefined;
        behaviour.chunkedJson = false;
      }
    });
  }

  it('embeddings are counted (their input tokens) in the same budget; past it they are refused before the backend', async () => {
    behaviour.honourMaxTokens = true;
    behaviour.usage = undefined;
    const input = Array.from(
      { length: 8 },
      (_, i) => `passage ${i}: ${'the quick brown fox jumps over the lazy dog '.repeat(2)}`,
    );
    let served = 0;
    let refusedOnce: Response | undefined;
    for (let i = 0; i < 20; i++) {
      const res = await call(svc, 'embed', '/v1/embeddings', { model: 'text-embedding-3-small', input });
      if (res.status === 429) {
        refusedOnce = res;
        break;
      }
      expect(res.status).toBe(200);
      const body = (await res.json()) as { usage: { total_tokens: number } };
      served += body.usage.total_tokens;
      // Settled with the answer's usage: what is left is the budget less every input served.
      expect(Number(res.headers.get('x-ratelimit-remaining-tokens'))).toBe(budget - served);
    }
    expect(refusedOnce).toBeDefined();
    const body = (await (refusedOnce as Response).json()) as { error: Refusal['error'] };
    expect(body.error.code).toBe('tokens');
    // The estimate: the inputs counted with the tokenizer.
    expect(body.error.details.requested).toBe(countTokens(input.join('\n')));
    expect(served).toBeLessThanOrEqual(budget);
    expect(served).toBeGreaterThan(budget - 2 * body.error.details.requested);
    // The same budget as chat: a chat request finds what the embeddings left.
    const chat = await chatTo(svc, 'embed', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    const left = budget - served;
    if (left >= promptOf('hi') + 5) {
      expect(chat.status).toBe(200);
      await chat.json();
    } else {
      expect(chat.status).toBe(429);
      expect(((await chat.json()) as { error: Refusal['error'] }).error.details.remaining).toBe(left);
    }
  });
});

const redisUp = await redisReachable('safety-filter token limits on Redis');

for (const store of ['memory', 'redis'] as const) {
  const skip = store === 'redis' && !redisUp;
  describe.skipIf(skip)(
    `overshoot is carried into the next window as debt (${store} store, 2 s windows)${skip ? ' (skipped: no Redis at 127.0.0.1:6379)' : ''}`,
    () => {
      let svc: StartedService;
      let fixture: OpenAiBackend;
      const debtPrefix = `switchyard:test:debt:${randomUUID()}`;

      beforeAll(async () => {
        // A backend that ignores the cap: every answer reports 7,000 tokens.
        fixture = await startOpenAiBackend({ usage: () => ({ prompt_tokens: 20, completion_tokens: 6980 }) });
        const dir = mkdtempSync(join(tmpdir(), 'filter-debt-'));
        svc = await startService('configs/safety-filter.yaml', {
          env: {
            FILTER_BACKEND_URL: fixture.url,
            FILTER_TENANTS_FILE: writeTenants(),
            FILTER_AUDIT_PATH: join(dir, 'audit.db'),
            FILTER_RATE_BACKEND: store,
            REDIS_URL,
          },
          set: [
            'resources.limits.window_seconds=2',
            ...(store === 'redis' ? [`resources.limits.prefix=${debtPrefix}`, 'resources.limits.insurance=false'] : []),
          ],
        });
      }, 60_000);

      afterAll(async () => {
        await svc?.close();
        await fixture?.close();
        if (store === 'redis') await deleteKeys(debtPrefix);
      });

      it('a 3,000-token tenant that received 7,000 does not start the next window fresh; Retry-After says when it fits', async () => {
        const content = 'an answer as long as you like';
        const res = await chatTo(svc, 'overshoot', { messages: [{ role: 'user', content }] });
        expect(res.status).toBe(200);
        const answer = (await res.json()) as { usage: { total_tokens: number } };
        expect(answer.usage.total_tokens).toBe(7000);
        // The cap it was sent with (what was left), which this backend ignored.
        expect(fixture.requests.at(-1)?.body.max_tokens).toBe(budget - promptOf(content));
        expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe('0');

        // Same window: refused, 4,000 over the limit.
        const now = await refused(svc, 'overshoot');
        expect(now.status).toBe(429);
        expect(now.error.details.remaining).toBe(0);
        expect(now.error.details.debt).toBeGreaterThanOrEqual(1000);

        // The next window (started once this one ends) carries the 4,000: still refused, 1,000 over.
        await sleep(2100);
        const next = await refused(svc, 'overshoot');
        expect(next.status).toBe(429);
        expect(next.error.details).toMatchObject({ remaining: 0, debt: 1000 });
        // It fits once that window ends (the debt is 1,000 of the next 3,000): Retry-After says so.
        expect(next.retryAfter).toBeGreaterThanOrEqual(1);
        expect(next.retryAfter).toBeLessThanOrEqual(2);
        await sleep(next.retryAfter * 1000);
        const after = await chatTo(svc, 'overshoot', { messages: [{ role: 'user', content }] });
        expect(after.status).toBe(200);
        await after.json();
        // Its cap: what the debt left of the window (all of it only if a whole window passed idle).
        const cap = fixture.requests.at(-1)?.body.max_tokens as number;
        expect(cap).toBeGreaterThanOrEqual(budget - 1000 - promptOf(content));
        expect(cap).toBeLessThanOrEqual(budget - promptOf(content));
      }, 30_000);
    },
  );
}

describe.skipIf(!redisUp)(
  `token limits on Redis across two processes${redisUp ? '' : ' (skipped: no Redis at 127.0.0.1:6379)'}`,
  () => {
    beforeAll(async () => {
      backend = await startOpenAiBackend({
        chunkSize: 16,
        chunkDelayMs: 2,
        usage: () => ({ prompt_tokens: 20, completion_tokens: perAnswer - 20 }),
      });
      const dir = mkdtempSync(join(tmpdir(), 'filter-tokens-'));
      const tenants = join(dir, 'tenants.yaml');
      writeFileSync(
        tenants,
        `tenants:\n  - id: metered\n    backend: llm\n    policy: default.yaml\n    requests_per_minute: 100000\n` +
          `    tokens_per_minute: ${limit}\n    classifiers: [pii]\n    api_keys: [{ key: ${key} }]\n`,
      );
      const start = (n: number) =>
        spawnService('configs/safety-filter.yaml', {
          env: {
            FILTER_BACKEND_URL: backend.url,
            FILTER_TENANTS_FILE: tenants,
            FILTER_RATE_BACKEND: 'redis',
            REDIS_URL,
            FILTER_AUDIT_PATH: join(dir, `audit-${n}.db`),
          },
          set: [`resources.limits.prefix=${prefix}`, 'resources.limits.insurance=false'],
        });
      gateways.push(...(await Promise.all([start(1), start(2)])));
    }, 120_000);

    afterAll(async () => {
      await Promise.all(gateways.map((g) => g.stop()));
      await backend?.close();
      await deleteKeys(prefix);
    });

    it('tokens served stay within the limit plus one request’s estimate; the shared count is exact', async () => {
      let served = 0;
      let refused = 0;
      let estimate = 0;
      const send = async (i: number) => {
        const stream = i % 2 === 1;
        const res = await fetch(`${gateways[i % 2].url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
          body: JSON.stringify({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: `hello number ${i}` }],
            max_tokens: 100,
            ...(stream ? { stream: true } : {}),
          }),
        });
        if (res.status === 429) {
          const body = await res.json();
          expect(body.error).toMatchObject({ type: 'rate_limit_exceeded', code: 'tokens' });
          estimate = Math.max(estimate, body.error.details.requested);
          refused++;
          return;
        }
        expect(res.status).toBe(200);
        const text = await res.text();
        if (stream) {
          expect(text).toContain('data: [DONE]');
          // The client did not ask for usage: none reaches it.
          expect(text).not.toMatch(/"choices":\[\]/);
        }
        served++;
      };
      // Waves of concurrent requests over both processes: each wave's settles free what the
      // estimates held, which the next wave (on either process) can use.
      for (let wave = 0; wave < 5; wave++) {
        await Promise.all(Array.from({ length: 16 }, (_, i) => send(wave * 16 + i)));
        // Streamed answers settle when their response closes: let the settles land.
        await until(async () => (await usedInRedis()) % perAnswer === 0, 5000);
      }
      expect(refused).toBeGreaterThan(0);
      expect(estimate).toBeGreaterThan(100);
      // The property: within one window, what was served is at most the limit plus one estimate...
      expect(served * perAnswer).toBeLessThanOrEqual(limit + estimate);
      // ...and the settles let the budget be used: no more than one estimate is left unused.
      expect(served * perAnswer).toBeGreaterThan(limit - estimate);
      // Exact across processes: the shared count is the usage of every answer served.
      expect(await usedInRedis()).toBe(served * perAnswer);
      // What the backend reported matches: every answer served reached the backend once.
      expect(backend.requests.length).toBe(served);
      // Every streamed request was sent upstream asking for usage.
      for (const r of backend.requests.filter((r) => r.body.stream === true)) {
        expect(r.body.stream_options).toEqual({ include_usage: true });
      }
    }, 60_000);
  },
);

async function usedInRedis(): Promise<number> {
  const redis = new Redis(REDIS_URL);
  try {
    return Number((await redis.hget(`${prefix}:tokens:caller:metered`, 'u')) ?? 0);
  } finally {
    await redis.quit();
  }
}
