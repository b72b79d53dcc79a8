/**
 * Tokens per minute across gateway processes: two safety-filter processes (configs/safety-filter.yaml,
 * `switchyard serve`, rate-limit store on Redis) in front of one fixture backend whose usage is
 * known (100 tokens an answer), one tenant with 2000 tokens per minute. Waves of concurrent
 * requests, plain and streamed, spread over both processes: the tokens served in the window never
 * exceed the limit by more than one request's estimate, the budget is used (the settle refunds
 * across processes), and the shared count in Redis is exactly what was served. Needs Redis at
 * 127.0.0.1:6379: required when CI=true, else skipped with the reason shown.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';
import { deleteKeys, REDIS_URL, redisReachable } from '../helpers/redis.ts';
import { until } from '../helpers/servers.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';

const redisUp = await redisReachable('safety-filter token limits across processes');
const prefix = `switchyard:test:tokens:${randomUUID()}`;
const key = 'sk-tokens-test-0001';
const limit = 2000;
const perAnswer = 100;

let backend: OpenAiBackend;
const gateways: ServiceProcess[] = [];

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
