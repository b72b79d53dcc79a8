/**
 * The Redis backend: several gateway processes sharing one Redis share one limit exactly. Two
 * independent stage instances (each with its own Redis connection, as two processes would have)
 * stand for two gateways. Needs Redis at 127.0.0.1:6379: required when CI=true, else skipped
 * with the reason shown.
 */
import { randomUUID } from 'node:crypto';
import { type AddressInfo, createConnection, createServer, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { callerKey, createLimiter } from '../../plugins/rate-limit/api.ts';
import rateLimiter from '../../plugins/rate-limit/resource.ts';
import rateLimit, { type RateLimitOptions } from '../../plugins/rate-limit/stage.ts';
import type { Caller, GatewayContext, GatewayError, StageInstance } from '../../runtime/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { deleteKeys, REDIS_URL, redisReachable } from '../helpers/redis.ts';
import { until } from '../helpers/servers.ts';
import { requestState } from '../helpers/stage-harness.ts';

const redisUp = await redisReachable('rate-limit Redis tests');
const runPrefix = `switchyard:test:rl:${randomUUID()}`;

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** A stage instance, as one gateway process would build it. */
async function gateway(options: Partial<RateLimitOptions>): Promise<StageInstance> {
  const stage = (await rateLimit.create(
    { window_seconds: 60, backend: 'redis', redis_url: REDIS_URL, insurance: false, ...options } as RateLimitOptions,
    createTestEnv({ serviceName: 'typed-proxy' }),
  )) as StageInstance;
  closers.push(() => stage.close?.());
  return stage;
}

/** Drives a stage directly with a minimal context; resolves to the status and headers it produced. */
async function call(
  stage: StageInstance,
  ip = '10.0.0.1',
  caller?: Caller,
): Promise<{ status: number; headers: Record<string, string> }> {
  const headers: Record<string, string> = {};
  const ctx = {
    ip,
    state: requestState({ requestId: randomUUID(), service: 'typed-proxy', caller }),
    get: () => '',
    set(h: Record<string, string>) {
      Object.assign(headers, h);
    },
  } as unknown as GatewayContext;
  try {
    await stage.handle(ctx, async () => {});
    return { status: 200, headers };
  } catch (err) {
    const e = err as GatewayError;
    if (e.kind !== 'rate_limited') throw err;
    return { status: 429, headers: { ...headers, ...e.headers } };
  }
}

describe.skipIf(!redisUp)(`rate-limit, Redis backend${redisUp ? '' : ' (skipped: no Redis at 127.0.0.1:6379)'}`, () => {
  afterAll(() => deleteKeys(runPrefix));

  it('two gateways sharing one Redis prefix let exactly `limit` requests through in total', async () => {
    const prefix = `${runPrefix}:shared`;
    const a = await gateway({ limit: 7, prefix });
    const b = await gateway({ limit: 7, prefix });
    // 40 concurrent requests from one client, spread over both gateways.
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => call(i % 2 ? a : b)));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(7);
    expect(results.filter((r) => r.status === 429)).toHaveLength(33);
    // Each success saw a different count: no double counting, no lost counts.
    expect(ok.map((r) => Number(r.headers['X-RateLimit-Remaining'])).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    for (const r of results) expect(r.headers['X-RateLimit-Limit']).toBe('7');
    const limited = results.find((r) => r.status === 429)!;
    expect(Number(limited.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
    // Another client has its own count on both gateways.
    expect((await call(a, '10.0.0.2')).status).toBe(200);
    expect((await call(b, '10.0.0.2')).status).toBe(200);
  });

  it('shares one window: a 1-second window resets for both gateways', async () => {
    const prefix = `${runPrefix}:window`;
    const a = await gateway({ limit: 1, window_seconds: 1, prefix });
    const b = await gateway({ limit: 1, window_seconds: 1, prefix });
    expect((await call(a)).status).toBe(200);
    expect((await call(b)).status).toBe(429);
    await sleep(1100);
    expect((await call(b)).status).toBe(200);
    expect((await call(a)).status).toBe(429);
  });

  it('keeps different prefixes apart, and reports connected', async () => {
    const a = await gateway({ limit: 1, prefix: `${runPrefix}:one` });
    const b = await gateway({ limit: 1, prefix: `${runPrefix}:two` });
    expect((await call(a)).status).toBe(200);
    expect((await call(b)).status).toBe(200);
    expect(await a.health?.()).toEqual({ ok: true, status: 'connected' });
    expect(a.describe?.()).toEqual({ limit: 1, window_seconds: 60, backend: 'redis' });
  });

  it('falls back to memory when Redis goes away mid-way, and shares the count again once it is back', async () => {
    const link = await tcpLink(6379);
    closers.push(() => link.stop());
    const prefix = `${runPrefix}:flaky`;
    const stage = await gateway({ limit: 3, prefix, redis_url: `redis://127.0.0.1:${link.port}`, insurance: true });
    const other = await gateway({ limit: 3, prefix });
    expect((await call(stage)).headers['X-RateLimit-Remaining']).toBe('2');
    await link.stop();
    // Redis is gone for `stage`: it still answers, counting on its own.
    const during = await call(stage);
    expect(during.status).toBe(200);
    expect(during.headers['X-RateLimit-Remaining']).toBe('2');
    expect(await stage.health?.()).toMatchObject({ ok: true, status: 'fallback-memory' });
    await link.start();
    await until(async () => (await stage.health?.())?.status === 'connected');
    // Back on the shared count (1 used through `stage` before the outage).
    expect((await call(other)).headers['X-RateLimit-Remaining']).toBe('1');
    expect((await call(stage)).headers['X-RateLimit-Remaining']).toBe('0');
    expect((await call(other)).status).toBe(429);
  });

  it('per-caller limits stay exact across two gateways sharing a rate-limiter resource prefix', async () => {
    const prefix = `${runPrefix}:per-caller`;
    // Two processes' worth of resources (each its own Redis connection) and a stage on each.
    const gatewayWithResource = async () => {
      const made = await rateLimiter.create(
        { limit: 100, window_seconds: 60, backend: 'redis', redis_url: REDIS_URL, prefix, insurance: false },
        createTestEnv({ serviceName: 'safety' }),
      );
      closers.push(() => made.close?.());
      const stage = (await rateLimit.create(
        { limiter: 'limits', key: 'caller', limit_from: 'caller.attributes.requests_per_minute' } as RateLimitOptions,
        createTestEnv({ resources: { limits: made.value } }),
      )) as StageInstance;
      return { stage, limiter: made.value };
    };
    const [a, b] = await Promise.all([gatewayWithResource(), gatewayWithResource()]);
    const tenants = { small: 3, large: 8 };
    const results = await Promise.all(
      Object.entries(tenants).flatMap(([id, rpm]) =>
        Array.from({ length: 20 }, (_, i) =>
          call(i % 2 ? a.stage : b.stage, '10.0.0.9', {
            id,
            authenticated: true,
            attributes: { requests_per_minute: rpm },
          }).then((r) => ({ id, ...r })),
        ),
      ),
    );
    for (const [id, rpm] of Object.entries(tenants)) {
      const mine = results.filter((r) => r.id === id);
      expect(
        mine.filter((r) => r.status === 200),
        id,
      ).toHaveLength(rpm);
      expect(
        mine.every((r) => r.headers['X-RateLimit-Limit'] === String(rpm)),
        id,
      ).toBe(true);
      // Either gateway's limiter sees the shared count, without counting.
      expect(await a.limiter.peek(callerKey(id), rpm)).toMatchObject({ remaining: 0, store: 'redis' });
      expect(await b.limiter.peek(callerKey(id), rpm)).toMatchObject({ remaining: 0, store: 'redis' });
    }
  });

  it('a rate-limiter resource counts under `switchyard:rl:<service>:<resource name>` by default', async () => {
    const service = `rl-test-${randomUUID()}`;
    const made = await rateLimiter.create(
      { limit: 5, window_seconds: 60, backend: 'redis', redis_url: REDIS_URL, insurance: false },
      createTestEnv({ serviceName: service, logger: silentLogger.child({ resource: 'limits' }) }),
    );
    closers.push(() => made.close?.());
    await made.value.consume('k');
    const admin = new Redis(REDIS_URL);
    closers.push(() => void admin.quit());
    expect(await admin.keys(`switchyard:rl:${service}:*`)).toEqual([`switchyard:rl:${service}:limits:k`]);
    await deleteKeys(`switchyard:rl:${service}:`);
  });

  it('token budgets fall back to memory when Redis goes away, and share the count again once it is back', async () => {
    const link = await tcpLink(6379);
    closers.push(() => link.stop());
    const prefix = `${runPrefix}:tokens-flaky`;
    const options = { limit: 1, windowSeconds: 60, backend: 'redis' as const, prefix, logger: silentLogger };
    const flaky = await createLimiter({ ...options, redisUrl: `redis://127.0.0.1:${link.port}`, insurance: true });
    const other = await createLimiter({ ...options, redisUrl: REDIS_URL, insurance: false });
    closers.push(
      () => flaky.close(),
      () => other.close(),
    );
    const held = await flaky.tokens.reserve('t', 400, 1000);
    expect(held).toMatchObject({ allowed: true, used: 400, store: 'redis' });
    await link.stop();
    // Redis is gone for `flaky`: it still answers, counting on its own.
    expect(await flaky.tokens.reserve('t', 700, 1000)).toMatchObject({
      allowed: true,
      used: 700,
      store: 'memory-fallback',
    });
    // A Redis reservation settled while Redis is away: nothing to refund in memory; Redis keeps the estimate.
    expect(await flaky.tokens.settle(held.reservation!, 100, 1000)).toMatchObject({ store: 'memory-fallback' });
    expect(await flaky.health()).toMatchObject({ ok: true, status: 'fallback-memory' });
    await link.start();
    await until(async () => flaky.health().status === 'connected');
    expect(await flaky.tokens.peek('t', 1000)).toMatchObject({ used: 400, store: 'redis' });
    expect(await other.tokens.reserve('t', 601, 1000)).toMatchObject({ allowed: false, used: 400 });
  });

  it('the reusable limiter peeks without counting', async () => {
    const limiter = await createLimiter({
      limit: 3,
      windowSeconds: 60,
      backend: 'redis',
      redisUrl: REDIS_URL,
      prefix: `${runPrefix}:tenant-a`,
      logger: silentLogger,
    });
    closers.push(() => limiter.close());
    expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 3, store: 'redis' });
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 2, store: 'redis' });
    expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 2 });
  });
});

describe('rate-limit, Redis unreachable', () => {
  const deadRedis = 'redis://127.0.0.1:1';

  it('with insurance (default) starts anyway and limits in memory per process, reporting the fallback', async () => {
    const stage = await gateway({ limit: 2, redis_url: deadRedis, insurance: true, prefix: `${runPrefix}:dead` });
    expect((await call(stage)).status).toBe(200);
    expect((await call(stage)).status).toBe(200);
    const third = await call(stage);
    expect(third.status).toBe(429);
    expect(third.headers['X-RateLimit-Remaining']).toBe('0');
    expect(await stage.health?.()).toMatchObject({ ok: true, status: 'fallback-memory' });
  });

  it('without insurance refuses to start (a reload would keep the running graph)', async () => {
    await expect(gateway({ limit: 2, redis_url: deadRedis, insurance: false })).rejects.toThrow(
      /cannot connect to Redis/,
    );
  });
});

/** A TCP relay to a local port that can be cut and restored on the same port, to stage an outage. */
async function tcpLink(target: number) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: target });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  let listening = true;
  return {
    port,
    async stop() {
      if (!listening) return;
      listening = false;
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
    async start() {
      listening = true;
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
    },
  };
}
