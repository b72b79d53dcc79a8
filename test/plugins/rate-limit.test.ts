import { setTimeout as sleep } from 'node:timers/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterEach, describe, expect, it } from 'vitest';
import rateLimit, { type RateLimitOptions } from '../../plugins/rate-limit/index.ts';
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

describe('rate-limit options schema', () => {
  const validate = new Ajv2020({ allErrors: true, useDefaults: true, strict: true }).compile(rateLimit.options);

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
    });
  });

  it('accepts the key forms ip, caller and header:<name> only', () => {
    for (const key of ['ip', 'caller', 'header:X-Api-Key']) expect(validate({ limit: 1, key }), key).toBe(true);
    for (const key of ['tenant', 'header:', 'header:bad name', 'ip '])
      expect(validate({ limit: 1, key }), key).toBe(false);
    expect(validate({ limit: 0 })).toBe(false);
    expect(validate({ limit: 1, backend: 'postgres' })).toBe(false);
  });
});
