import { setTimeout as sleep } from 'node:timers/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterEach, describe, expect, it } from 'vitest';
import { callerKey } from '../../plugins/rate-limit/api.ts';
import rateLimiter from '../../plugins/rate-limit/resource.ts';
import rateLimit, { type RateLimitOptions } from '../../plugins/rate-limit/stage.ts';
import { referenceKeyword } from '../../runtime/config/references.ts';
import { type Caller, GatewayError, type Stage, type StageInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/**
 * The stage behind a real Koa server, errors rendered by the simple dialect. `X-Test-Caller` plays
 * an auth stage in front; `X-Test-Fail` makes the terminal stage throw.
 */
async function serve(options: Partial<RateLimitOptions>) {
  const env = createTestEnv();
  const stage = (await rateLimit.create({ window_seconds: 60, ...options } as RateLimitOptions, env)) as StageInstance;
  cleanups.push(() => stage.close?.());
  const fakeAuth: Stage = async (ctx, next) => {
    const caller = ctx.get('x-test-caller');
    if (caller) ctx.state.caller = { id: caller, authenticated: true } satisfies Caller;
    await next();
  };
  const terminal: Stage = async (ctx) => {
    if (ctx.get('x-test-fail')) throw new GatewayError('not_found', 'nothing here');
    ctx.body = { ok: true };
  };
  const server = await serveStages([fakeAuth, stage.handle, terminal]);
  cleanups.push(server.close);
  return { stage, env, get: (headers: Record<string, string> = {}) => fetch(`${server.url}/`, { headers }) };
}

function rl(res: Response) {
  return {
    limit: res.headers.get('x-ratelimit-limit'),
    remaining: res.headers.get('x-ratelimit-remaining'),
    reset: Number(res.headers.get('x-ratelimit-reset')),
  };
}

describe('rate-limit (memory backend)', () => {
  it('sends X-RateLimit-Limit/Remaining/Reset on every response, counting down', async () => {
    const { get } = await serve({ limit: 3 });
    const before = Math.floor(Date.now() / 1000);
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const res = await get();
      expect(res.status).toBe(200);
      seen.push(rl(res));
    }
    expect(seen.map((h) => [h.limit, h.remaining])).toEqual([
      ['3', '2'],
      ['3', '1'],
      ['3', '0'],
    ]);
    // Reset: a Unix timestamp in seconds, one window after the first request.
    for (const h of seen) {
      expect(Number.isInteger(h.reset)).toBe(true);
      expect(h.reset).toBeGreaterThanOrEqual(before + 59);
      expect(h.reset).toBeLessThanOrEqual(before + 62);
    }
  });

  it('answers 429 rate_limited past the limit, with Retry-After and retry_after_seconds', async () => {
    const { get } = await serve({ limit: 2 });
    await get();
    await get();
    const res = await get();
    expect(res.status).toBe(429);
    const body = await res.json();
    expect(body).toMatchObject({ error: 'rate_limited', message: 'Rate limit exceeded: 2 requests per 60s' });
    expect(typeof body.details).toBe('object');
    expect(Number.isInteger(body.retry_after_seconds)).toBe(true);
    expect(body.retry_after_seconds).toBeGreaterThanOrEqual(58);
    expect(body.retry_after_seconds).toBeLessThanOrEqual(60);
    expect(res.headers.get('retry-after')).toBe(String(body.retry_after_seconds));
    expect(rl(res).limit).toBe('2');
    expect(rl(res).remaining).toBe('0');
    expect(rl(res).reset).toBeGreaterThan(Date.now() / 1000);
  });

  it('keeps the headers on error responses of later stages', async () => {
    const { get } = await serve({ limit: 5 });
    const res = await get({ 'X-Test-Fail': '1' });
    expect(res.status).toBe(404);
    expect(rl(res).limit).toBe('5');
    expect(rl(res).remaining).toBe('4');
  });

  it('starts a new window once the old one has passed (1-second window)', async () => {
    const { get } = await serve({ limit: 1, window_seconds: 1 });
    const first = await get();
    expect(first.status).toBe(200);
    const blocked = await get();
    expect(blocked.status).toBe(429);
    expect((await blocked.json()).retry_after_seconds).toBe(1);
    expect(blocked.headers.get('retry-after')).toBe('1');
    await sleep(1100);
    const again = await get();
    expect(again.status).toBe(200);
    expect(rl(again).remaining).toBe('0');
  });

  it('counts each authenticated caller separately by default, and unauthenticated ones by address', async () => {
    const { get } = await serve({ limit: 1 });
    expect((await get({ 'X-Test-Caller': 'alice' })).status).toBe(200);
    expect((await get({ 'X-Test-Caller': 'alice' })).status).toBe(429);
    expect((await get({ 'X-Test-Caller': 'bob' })).status).toBe(200);
    expect((await get()).status).toBe(200);
    expect((await get()).status).toBe(429);
  });

  it('keys on a header when told to, falling back to the address without it', async () => {
    const { get } = await serve({ limit: 1, key: 'header:X-Client-Id' });
    expect((await get({ 'X-Client-Id': 'a' })).status).toBe(200);
    expect((await get({ 'X-Client-Id': 'a', 'X-Test-Caller': 'alice' })).status).toBe(429);
    expect((await get({ 'X-Client-Id': 'b' })).status).toBe(200);
    // A client cannot borrow the address bucket by naming it in the header.
    expect((await get({ 'X-Client-Id': 'ip:127.0.0.1' })).status).toBe(200);
    expect((await get()).status).toBe(200);
    expect((await get()).status).toBe(429);
  });

  it('keys on the address only with key: ip', async () => {
    const { get } = await serve({ limit: 1, key: 'ip' });
    expect((await get({ 'X-Test-Caller': 'alice' })).status).toBe(200);
    expect((await get({ 'X-Test-Caller': 'bob' })).status).toBe(429);
  });

  it('can leave the X-RateLimit-* headers out, keeping Retry-After on the 429', async () => {
    const { get } = await serve({ limit: 1, headers: false });
    const ok = await get();
    expect(ok.headers.get('x-ratelimit-limit')).toBeNull();
    const res = await get();
    expect(res.status).toBe(429);
    expect(res.headers.get('x-ratelimit-remaining')).toBeNull();
    expect(res.headers.get('retry-after')).not.toBeNull();
  });

  it('describes itself, reports healthy, and counts decisions', async () => {
    const { stage, env, get } = await serve({ limit: 1 });
    expect(stage.describe?.()).toEqual({ limit: 1, window_seconds: 60, backend: 'memory' });
    expect(await stage.health?.()).toMatchObject({ ok: true });
    await get();
    await get();
    const text = await env.metrics.registry.getSingleMetricAsString('switchyard_rate_limit_decisions_total');
    expect(text).toContain('switchyard_rate_limit_decisions_total{decision="allowed",store="memory"} 1');
    expect(text).toContain('switchyard_rate_limit_decisions_total{decision="limited",store="memory"} 1');
  });
});

describe('rate-limit with per-caller limits and a shared rate-limiter resource', () => {
  /** Limiter resource + stages behind one server; X-Test-Caller / X-Test-Rpm play a tenant-auth stage. */
  async function serveShared(stageOptions: Array<Partial<RateLimitOptions>>, resourceLimit = 10) {
    const made = await rateLimiter.create(
      { limit: resourceLimit, window_seconds: 60, backend: 'memory', redis_url: '', insurance: true },
      createTestEnv(),
    );
    const limiter = made.value;
    const env = createTestEnv({ resources: { limits: limiter } });
    const stages = await Promise.all(
      stageOptions.map(
        async (o) => (await rateLimit.create({ limiter: 'limits', ...o } as RateLimitOptions, env)) as StageInstance,
      ),
    );
    const fakeTenantAuth: Stage = async (ctx, next) => {
      const id = ctx.get('x-test-caller');
      const rpm = ctx.get('x-test-rpm');
      if (id) ctx.state.caller = { id, authenticated: true, attributes: rpm ? { rpm: JSON.parse(rpm) } : {} };
      await next();
    };
    const terminal: Stage = async (ctx) => {
      ctx.body = { ok: true };
    };
    // /0, /1...: the stage of that index.
    const route: Stage = (ctx, next) => stages[Number(ctx.path.slice(1)) || 0].handle(ctx, next);
    const server = await serveStages([fakeTenantAuth, route, terminal]);
    cleanups.push(server.close);
    const get = (path: string, caller: string, rpm?: unknown) =>
      fetch(`${server.url}${path}`, {
        headers: { 'X-Test-Caller': caller, ...(rpm === undefined ? {} : { 'X-Test-Rpm': JSON.stringify(rpm) }) },
      });
    return { limiter, stages, get };
  }

  it('takes the limit from the caller (limit_from), each caller counting against its own', async () => {
    const { get } = await serveShared([{ key: 'caller', limit_from: 'caller.attributes.rpm' }]);
    const statuses = async (caller: string, rpm: number, n: number) => {
      const out = [];
      for (let i = 0; i < n; i++) {
        const res = await get('/0', caller, rpm);
        out.push([res.status, res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining')]);
      }
      return out;
    };
    expect(await statuses('small', 2, 3)).toEqual([
      [200, '2', '1'],
      [200, '2', '0'],
      [429, '2', '0'],
    ]);
    expect((await statuses('large', 4, 5)).map(([s]) => s)).toEqual([200, 200, 200, 200, 429]);
    const res = await get('/0', 'small', 2);
    expect((await res.json()).message).toBe('Rate limit exceeded: 2 requests per 60s');
  });

  it('falls back to `limit`, else to the limiter’s limit, when the caller has no usable limit', async () => {
    const { get } = await serveShared(
      [{ limit_from: 'caller.attributes.rpm' }, { limit: 3, limit_from: 'caller.attributes.rpm' }],
      5,
    );
    for (const [rpm, caller] of [
      [undefined, 'a'],
      [0, 'b'],
      ['7', 'c'],
      [1.5, 'd'],
    ] as const) {
      expect((await get('/0', caller, rpm)).headers.get('x-ratelimit-limit'), String(rpm)).toBe('5');
      expect((await get('/1', `${caller}2`, rpm)).headers.get('x-ratelimit-limit'), String(rpm)).toBe('3');
    }
  });

  it('shares one count between stages naming the same limiter, which another stage can peek at', async () => {
    const { get, limiter, stages } = await serveShared([{ key: 'caller' }, { key: 'caller' }], 3);
    expect((await get('/0', 'alice')).headers.get('x-ratelimit-remaining')).toBe('2');
    expect((await get('/1', 'alice')).headers.get('x-ratelimit-remaining')).toBe('1');
    expect(await limiter.peek(callerKey('alice'))).toMatchObject({ remaining: 1, limit: 3 });
    expect(await limiter.peek(callerKey('alice'), 10)).toMatchObject({ remaining: 8, limit: 10 });
    expect(await limiter.peek(callerKey('alice'))).toMatchObject({ remaining: 1 }); // peeking does not count
    expect((await get('/0', 'alice')).status).toBe(200);
    expect((await get('/1', 'alice')).status).toBe(429);
    expect(stages[0].describe?.()).toEqual({ limit: 3, window_seconds: 60, backend: 'memory', limiter: 'limits' });
    // The resource owns the limiter: stages leave it open for the others.
    expect(stages[0].close).toBeUndefined();
  });

  it('refuses a `limiter` that is not a rate-limiter', async () => {
    const env = createTestEnv({ resources: { limits: { some: 'thing' } } });
    await expect(rateLimit.create({ limiter: 'limits' } as RateLimitOptions, env)).rejects.toThrow(
      'resource "limits" is not a rate-limiter',
    );
  });
});

describe('rate-limit options schema', () => {
  const ajv = new Ajv2020({ allErrors: true, useDefaults: true, strict: true });
  ajv.addKeyword(referenceKeyword); // `limiter` names a resource (x-ref)
  const validate = ajv.compile(rateLimit.options);

  it('requires a limit and fills in the defaults', () => {
    expect(validate({})).toBe(false);
    const options: Record<string, unknown> = { limit: 10 };
    expect(validate(options)).toBe(true);
    expect(options).toEqual({
      limit: 10,
      window_seconds: 60,
      backend: 'memory',
      redis_url: 'redis://127.0.0.1:6379',
      insurance: true,
      headers: true,
      skip_paths: ['/health'],
    });
  });

  it('takes a limiter resource instead of a limit, and a dotted limit_from path', () => {
    expect(validate({ limiter: 'limits' })).toBe(true);
    expect(validate({ limiter: 'limits', limit: 5, limit_from: 'caller.attributes.requests_per_minute' })).toBe(true);
    for (const limit_from of ['', 'caller..x', '.caller', 'caller.attributes[0]'])
      expect(validate({ limit: 1, limit_from }), limit_from).toBe(false);
  });

  it('accepts the key forms ip, caller and header:<name> only', () => {
    for (const key of ['ip', 'caller', 'header:X-Api-Key']) expect(validate({ limit: 1, key }), key).toBe(true);
    for (const key of ['tenant', 'header:', 'header:bad name', 'ip '])
      expect(validate({ limit: 1, key }), key).toBe(false);
    expect(validate({ limit: 0 })).toBe(false);
    expect(validate({ limit: 1, backend: 'postgres' })).toBe(false);
  });
});
