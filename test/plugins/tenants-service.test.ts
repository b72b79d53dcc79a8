/**
 * The tenants fixture service (test/fixtures/tenants/service.yaml, openai dialect) in front of two
 * local OpenAI-style backends: API keys select tenants (401 authentication_error otherwise), each
 * tenant has its own requests per minute (429 rate_limit_exceeded past it), and the admin routes
 * list the tenants and report what is left of a tenant's minute. With Redis, two gateways started
 * from the same file share each tenant's count exactly.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { deleteKeys, REDIS_URL, redisReachable } from '../helpers/redis.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

const serviceFile = join(import.meta.dirname, '../fixtures/tenants/service.yaml');
const redisUp = await redisReachable('tenants service tests (Redis)');

const keys = { acme: 'acme-secret-key', globex: 'globex-key-from-env', initech: 'initech-dev-key' };
const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/** An OpenAI-style backend that answers a chat completion naming itself and the headers it got. */
function backend(name: string, seen: IncomingMessage[]): Server {
  return createServer((req, res) => {
    seen.push(req);
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ object: 'chat.completion', model: name, choices: [] }));
    });
  });
}

const chat = (svc: StartedService, headers: Record<string, string>) =>
  fetch(`${svc.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });

const tenantInfo = async (svc: StartedService, id: string) => {
  const res = await fetch(`${svc.url}/admin/tenant-info`, { headers: { 'X-Tenant-ID': id } });
  expect(res.status).toBe(200);
  return res.json();
};

let backends: Server[] = [];
const seen: IncomingMessage[] = [];
let env: Record<string, string | undefined>;

beforeAll(async () => {
  backends = [backend('backend-a', seen), backend('backend-b', seen)];
  const [a, b] = await Promise.all(backends.map((s) => listenLocal(s)));
  // `{ env: VAR }` keys are read from the process environment when the directory loads.
  process.env.TENANTS_TEST_GLOBEX_KEY = keys.globex;
  env = { ...process.env, BACKEND_A_URL: `${a}/v1`, BACKEND_B_URL: `${b}/v1` };
});
afterAll(() => {
  for (const s of backends) closeNow(s);
  delete process.env.TENANTS_TEST_GLOBEX_KEY;
});

describe('tenants service (memory rate limits)', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(serviceFile, { env: { ...env, RL_PREFIX: `switchyard:test:tenants:${randomUUID()}` } });
  });
  afterAll(() => svc?.close());

  it('answers 401 authentication_error without a key or with an unknown one', async () => {
    const missing = await chat(svc, {});
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({
      error: {
        message: 'Missing API key: send it as "Authorization: Bearer <key>"',
        type: 'authentication_error',
        code: null,
        details: { header: 'Authorization' },
      },
    });
    const wrong = await chat(svc, bearer('sk-wrong'));
    expect(wrong.status).toBe(401);
    const body = await wrong.json();
    expect(body.error).toMatchObject({ message: 'Invalid API key', type: 'authentication_error' });
    expect(JSON.stringify(body)).not.toContain('sk-wrong');
    // Refused before counting or forwarding.
    expect(wrong.headers.get('x-ratelimit-limit')).toBeNull();
    expect(seen).toHaveLength(0);
  });

  it('proxies a tenant’s request without passing its API key to the backend', async () => {
    const res = await chat(svc, bearer(keys.acme));
    expect(res.status).toBe(200);
    expect((await res.json()).model).toBe('backend-a');
    expect(seen.at(-1)?.headers.authorization).toBeUndefined();
  });

  it('limits each tenant to its own requests per minute: 429 rate_limit_exceeded past it', async () => {
    // acme: 3 per minute (one already used above); globex: 5.
    const acme = [];
    for (let i = 0; i < 3; i++) acme.push(await chat(svc, bearer(keys.acme)));
    expect(acme.map((r) => r.status)).toEqual([200, 200, 429]);
    const limited = acme[2];
    expect(limited.headers.get('x-ratelimit-limit')).toBe('3');
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    const body = await limited.json();
    expect(body.error).toMatchObject({
      message: 'Rate limit exceeded: 3 requests per 60s',
      type: 'rate_limit_exceeded',
      code: null,
    });
    expect(body.error.retry_after_seconds).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('retry-after')).toBe(String(body.error.retry_after_seconds));

    const globex = [];
    for (let i = 0; i < 6; i++) globex.push(await chat(svc, bearer(keys.globex)));
    expect(globex.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(globex[0].headers.get('x-ratelimit-limit')).toBe('5');
    expect(globex.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['4', '3', '2', '1', '0', '0']);
    await Promise.all([...acme, ...globex].filter((r) => !r.bodyUsed).map((r) => r.body?.cancel()));
  });

  it('reports a tenant’s remaining requests as they are used, and an exhausted one as 0', async () => {
    const before = await tenantInfo(svc, 'initech');
    expect(before).toMatchObject({
      tenant: 'initech',
      backend: env.BACKEND_A_URL,
      policy: 'default.yaml',
      rate_limit: { requests_per_minute: 100, remaining: 100 },
      classifiers: [],
    });
    for (const expected of [99, 98]) {
      expect((await chat(svc, bearer(keys.initech))).status).toBe(200);
      expect((await tenantInfo(svc, 'initech')).rate_limit.remaining).toBe(expected);
    }
    const acme = await tenantInfo(svc, 'acme');
    expect(acme.rate_limit).toMatchObject({ requests_per_minute: 3, remaining: 0 });
    expect(Date.parse(acme.rate_limit.reset_at)).toBeGreaterThan(Date.now());
    expect(acme.classifiers).toEqual(['pii', 'injection']);
  });

  it('lists the tenants with their backend URLs and policies', async () => {
    const res = await fetch(`${svc.url}/admin/tenants`);
    expect(await res.json()).toEqual({
      tenants: [
        { id: 'acme', backend: env.BACKEND_A_URL, policy: 'default.yaml' },
        { id: 'globex', backend: env.BACKEND_B_URL, policy: 'strict.yaml' },
        { id: 'initech', backend: env.BACKEND_A_URL, policy: 'default.yaml' },
      ],
    });
  });

  it('answers tenant-info errors in the openai shape: 400 without X-Tenant-ID, 404 for an unknown tenant', async () => {
    const missing = await fetch(`${svc.url}/admin/tenant-info`);
    expect(missing.status).toBe(400);
    expect((await missing.json()).error).toMatchObject({
      message: 'Missing header X-Tenant-ID',
      type: 'invalid_request',
    });
    const unknown = await fetch(`${svc.url}/admin/tenant-info`, { headers: { 'X-Tenant-ID': 'hooli' } });
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error.message).toBe('Unknown tenant "hooli"');
  });

  it('sets the tenant as caller and its backend as the upstream for later stages', async () => {
    const res = await fetch(`${svc.url}/whoami`, { headers: bearer(keys.globex) });
    expect(await res.json()).toEqual({
      caller: {
        id: 'globex',
        authenticated: true,
        attributes: {
          tenant: 'globex',
          policy: 'strict.yaml',
          classifiers: ['pii'],
          requests_per_minute: 5,
          backend: 'llm-b',
        },
      },
      upstream: 'llm-b',
    });
  });
});

describe.skipIf(!redisUp)(`tenants service, two gateways sharing Redis${redisUp ? '' : ' (skipped: no Redis)'}`, () => {
  const prefix = `switchyard:test:tenants:${randomUUID()}`;
  let one: StartedService;
  let two: StartedService;
  beforeAll(async () => {
    const redisEnv = { ...env, RL_BACKEND: 'redis', REDIS_URL, RL_PREFIX: prefix };
    [one, two] = await Promise.all([
      startService(serviceFile, { env: redisEnv }),
      startService(serviceFile, { env: redisEnv }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([one?.close(), two?.close()]);
    await deleteKeys(prefix);
  });

  it('lets exactly each tenant’s requests per minute through across both gateways', async () => {
    const burst = (key: string) =>
      Promise.all(Array.from({ length: 12 }, (_, i) => chat(i % 2 ? one : two, bearer(key))));
    const [acme, globex] = await Promise.all([burst(keys.acme), burst(keys.globex)]);
    expect(acme.filter((r) => r.status === 200)).toHaveLength(3);
    expect(acme.filter((r) => r.status === 429)).toHaveLength(9);
    expect(globex.filter((r) => r.status === 200)).toHaveLength(5);
    expect(globex.filter((r) => r.status === 429)).toHaveLength(7);
    await Promise.all([...acme, ...globex].map((r) => r.body?.cancel()));

    // Either gateway reports the shared count.
    for (const svc of [one, two]) {
      expect((await tenantInfo(svc, 'acme')).rate_limit).toMatchObject({ requests_per_minute: 3, remaining: 0 });
      expect((await tenantInfo(svc, 'globex')).rate_limit).toMatchObject({ requests_per_minute: 5, remaining: 0 });
    }
    expect((await tenantInfo(one, 'initech')).rate_limit.remaining).toBe(100);
    await chat(two, bearer(keys.initech));
    expect((await tenantInfo(one, 'initech')).rate_limit.remaining).toBe(99);
  });
});
