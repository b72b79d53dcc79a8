/**
 * Two real services started from one YAML (as two gateway processes behind a load balancer),
 * with token auth and a Redis-backed rate limit: together they let exactly `limit` requests of a
 * caller through, whichever gateway answers. Needs Redis at 127.0.0.1:6379 (required when CI=true).
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { deleteKeys, REDIS_URL, redisReachable } from '../helpers/redis.ts';
import { writeServiceFile } from '../helpers/services.ts';

const redisUp = await redisReachable('rate-limit service tests');

const stages = join(import.meta.dirname, '../fixtures/test-stages.ts');
const yaml = `
service: limited
version: 0.0.1
listen: { port: 0 }
plugins: [${JSON.stringify(stages)}]
dialect: simple
auth:
  enabled: true
  token_header: X-Proxy-Token
  tokens:
    - { name: alice, token: "\${ALICE_TOKEN}" }
    - { name: bob, token: "\${BOB_TOKEN}" }
  skip_paths: [/open]
rate_limit:
  enabled: true
  limit: 5
  window_seconds: 60
  backend: redis
  redis_url: "\${REDIS_URL}"
  prefix: "\${RL_PREFIX}"
routes:
  - match: { method: GET, path: /echo }
    pipeline: [{ test-echo: { text: hello } }]
  - match: { method: GET, path: /open }
    pipeline: [{ test-echo: { text: open } }]
`;

describe.skipIf(!redisUp)(
  `two services from YAML sharing a Redis rate limit${redisUp ? '' : ' (skipped: no Redis)'}`,
  () => {
    const prefix = `switchyard:test:rl-svc:${randomUUID()}`;
    const env = { ...process.env, ALICE_TOKEN: 'alice-secret', BOB_TOKEN: 'bob-secret', REDIS_URL, RL_PREFIX: prefix };
    let one: StartedService;
    let two: StartedService;

    beforeAll(async () => {
      const file = writeServiceFile(yaml);
      [one, two] = await Promise.all([startService(file, { env }), startService(file, { env })]);
    });
    afterAll(async () => {
      await Promise.all([one?.close(), two?.close()]);
      await deleteKeys(prefix);
    });

    it('refuses requests without a valid token before counting them', async () => {
      const missing = await fetch(`${one.url}/echo`);
      expect(missing.status).toBe(401);
      expect(await missing.json()).toEqual({
        error: 'unauthorized',
        message: 'Missing token in header X-Proxy-Token',
        details: { header: 'X-Proxy-Token' },
      });
      const wrong = await fetch(`${two.url}/echo`, { headers: { 'X-Proxy-Token': 'alice-secre' } });
      expect(wrong.status).toBe(401);
      expect((await wrong.json()).message).toBe('Invalid token');
      expect(wrong.headers.get('x-ratelimit-limit')).toBeNull();
    });

    it('lets exactly `limit` requests of a caller through across both gateways, then 429', async () => {
      const alice = { 'X-Proxy-Token': 'alice-secret' };
      const responses = await Promise.all(
        Array.from({ length: 16 }, (_, i) => fetch(`${(i % 2 ? one : two).url}/echo`, { headers: alice })),
      );
      const statuses = responses.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(5);
      expect(statuses.filter((s) => s === 429)).toHaveLength(11);
      const limited = responses.find((r) => r.status === 429)!;
      const body = await limited.json();
      expect(body).toMatchObject({ error: 'rate_limited', message: 'Rate limit exceeded: 5 requests per 60s' });
      expect(Number.isInteger(body.retry_after_seconds) && body.retry_after_seconds >= 1).toBe(true);
      expect(limited.headers.get('retry-after')).toBe(String(body.retry_after_seconds));
      expect(limited.headers.get('x-ratelimit-limit')).toBe('5');
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(limited.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
      await Promise.all(responses.filter((r) => !r.bodyUsed).map((r) => r.body?.cancel()));

      // Another caller has a limit of its own.
      const bob = await fetch(`${one.url}/echo`, { headers: { 'X-Proxy-Token': 'bob-secret' } });
      expect(bob.status).toBe(200);
      expect(bob.headers.get('x-ratelimit-remaining')).toBe('4');
    });

    it('skips authentication on skip_paths (rate-limited by address instead)', async () => {
      const res = await fetch(`${two.url}/open`);
      expect(res.status).toBe(200);
      expect((await res.json()).text).toBe('open');
      expect(res.headers.get('x-ratelimit-limit')).toBe('5');
    });
  },
);
