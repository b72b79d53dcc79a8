/**
 * The tenant directory (file and inline, the three key forms, errors at build time), the
 * tenant-auth stage (401 bodies in the openai dialect, the caller and upstream it sets) and the
 * tenants-api stage (list, info with a shared limiter), each behind a real HTTP server.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Limiter } from '../../plugins/rate-limit/api.ts';
import rateLimiter from '../../plugins/rate-limit/resource.ts';
import rateLimit from '../../plugins/rate-limit/stage.ts';
import type { TenantDirectory } from '../../plugins/tenants/api.ts';
import tenantAuth from '../../plugins/tenants/auth.ts';
import tenantDirectory from '../../plugins/tenants/resource.ts';
import tenantsApi from '../../plugins/tenants-api/index.ts';
import { openAiDialect } from '../../runtime/dialects.ts';
import type { ResourceInstance, Stage, StageInstance, Upstream } from '../../runtime/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const fixtures = join(import.meta.dirname, '../fixtures/tenants');
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

// Real HTTP upstreams (nothing needs to listen: the directory only reads their URLs).
const upstreams: Record<string, Upstream> = {
  'llm-a': createUpstream('llm-a', { kind: 'openai', url: 'http://127.0.0.1:11434/v1' }, deps()),
  'llm-b': createUpstream('llm-b', { kind: 'http', url: 'http://llm-b.internal:8000/v1' }, deps()),
};
function deps() {
  return { logger: silentLogger, configDir: fixtures };
}
afterAll(async () => {
  for (const u of Object.values(upstreams)) await u.close();
});

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Builds a directory as a service would, from resource options; `logs` collects what it logged. */
async function directory(options: Record<string, unknown>, env: Record<string, string> = {}) {
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const testEnv = createTestEnv({ upstreams, configDir: fixtures, logger: pino({ level: 'info' }, sink) });
    const instance = (await tenantDirectory.create(options as never, testEnv)) as ResourceInstance<TenantDirectory>;
    return { dir: instance.value, instance, logs };
  } finally {
    for (const k of Object.keys(env)) if (saved[k] === undefined) delete process.env[k];
  }
}

const fileOptions = { file: 'tenants.yaml' };
const globexKey = { TENANTS_TEST_GLOBEX_KEY: 'globex-key-from-env' };

describe('tenant-directory resource', () => {
  it('loads a tenants file relative to the config, resolving backends to upstream URLs', async () => {
    const { dir, instance } = await directory(fileOptions, globexKey);
    expect(dir.list().map((t) => t.id)).toEqual(['acme', 'globex', 'initech']);
    expect(dir.get('acme')).toEqual({
      id: 'acme',
      backend: 'llm-a',
      backends: ['llm-a'],
      backendUrl: 'http://127.0.0.1:11434/v1',
      policy: 'default.yaml',
      requests_per_minute: 3,
      classifiers: ['pii', 'injection'],
    });
    expect(dir.get('globex')).toMatchObject({ backend: 'llm-b', backendUrl: 'http://llm-b.internal:8000/v1' });
    // classifiers defaults to none.
    expect(dir.get('initech')?.classifiers).toEqual([]);
    expect(dir.get('nobody')).toBeUndefined();
    expect(await instance.health?.()).toEqual({ ok: true, status: 'loaded', detail: { tenants: 3 } });
  });

  it('finds a tenant by any of its keys: digest (any case), environment variable, or key in clear', async () => {
    const { dir } = await directory(fileOptions, globexKey);
    expect(dir.byKey('acme-secret-key')?.id).toBe('acme');
    expect(dir.byKey('acme-second-key')?.id).toBe('acme'); // digest written in upper case
    expect(dir.byKey('globex-key-from-env')?.id).toBe('globex');
    expect(dir.byKey('initech-dev-key')?.id).toBe('initech');
    for (const wrong of ['', 'acme-secret-ke', 'acme-secret-key ', 'ACME-SECRET-KEY', sha256('acme-secret-key')]) {
      expect(dir.byKey(wrong), wrong).toBeUndefined();
    }
  });

  it('matches a UTF-8 key sent as raw header bytes (as Node hands them over)', async () => {
    const { dir } = await directory({
      tenants: [{ id: 't', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ key: 'clé-ü' }] }],
    });
    expect(dir.byKey(Buffer.from('clé-ü', 'utf8').toString('latin1'))?.id).toBe('t');
  });

  it('warns once about keys in clear, naming the tenants and never the key', async () => {
    const { logs } = await directory({
      tenants: [
        { id: 'a', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ key: 'k1' }, { key: 'k2' }] },
        { id: 'b', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ key: 'k3' }] },
        { id: 'c', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ sha256: sha256('k4') }] },
      ],
    });
    const warnings = logs.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ tenants: ['a', 'b'] });
    expect(warnings[0].msg).toMatch(/in clear/);
    expect(JSON.stringify(logs)).not.toMatch(/k1|k2|k3/);
  });

  it('logs nothing about keys when none is in clear', async () => {
    const { logs } = await directory({
      tenants: [
        { id: 'a', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ sha256: sha256('x') }] },
      ],
    });
    expect(logs.filter((l) => l.level === 40)).toEqual([]);
  });

  const one = (overrides: Record<string, unknown>) => ({
    tenants: [
      { id: 'a', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ key: 'k' }], ...overrides },
    ],
  });

  it('refuses to build with an unknown backend, an unset key variable, or a key shared by two tenants', async () => {
    await expect(directory(one({ backend: 'llm-z' }))).rejects.toThrow(/tenant "a": backend: unknown upstream "llm-z"/);
    await expect(directory(one({ api_keys: [{ env: 'TENANTS_TEST_UNSET_VAR' }] }))).rejects.toThrow(
      'tenant "a": api_keys[0]: environment variable TENANTS_TEST_UNSET_VAR is not set',
    );
    const shared = {
      tenants: [
        { id: 'a', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ key: 'same' }] },
        { id: 'b', backend: 'llm-a', policy: 'p', requests_per_minute: 1, api_keys: [{ sha256: sha256('same') }] },
      ],
    };
    const err = await directory(shared).catch((e: Error) => e);
    expect((err as Error).message).toBe('tenant "b": api_keys[0] is also a key of tenant "a"');
    const twice = { tenants: [...one({}).tenants, ...one({ api_keys: [{ key: 'other' }] }).tenants] };
    await expect(directory(twice)).rejects.toThrow('tenant "a" is declared twice');
    await expect(directory({ ...fileOptions, tenants: [] })).rejects.toThrow(/must match exactly one schema in oneOf/);
  });

  it('reports every problem of a tenants file with its line and column', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tenants-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      [
        'tenants:',
        '  - id: acme',
        '    backend: llm-a',
        '    policy: default.yaml',
        '    requests_per_minute: lots',
        '    api_keys: [{ sha256: not-a-digest }]',
        '    colour: blue',
      ].join('\n'),
    );
    const err = (await directory({ file }).catch((e: Error) => e)) as Error;
    expect(err.message).toContain(`${file}:5:26: tenants[0].requests_per_minute: must be integer`);
    expect(err.message).toContain(`${file}:2:5: tenants[0]: must NOT have additional properties (colour)`);
    expect(err.message).toContain(`${file}:6:26: tenants[0].api_keys[0].sha256: must match pattern`);
    expect(err.message.split('\n')).toHaveLength(3);
    await expect(directory({ file: join(dir, 'missing.yaml') })).rejects.toThrow(/cannot read tenants file .*ENOENT/);
  });
});

describe('a tenant with several backends (providers)', () => {
  const spec = (backend: unknown) => ({
    tenants: [{ id: 'multi', backend, policy: 'p', requests_per_minute: 1, api_keys: [{ key: 'sk-multi' }] }],
  });

  it('keeps them in order; the first is the backend reports name; tenant-auth hands the list to the proxy', async () => {
    const { dir } = await directory(spec(['llm-b', 'llm-a']));
    expect(dir.get('multi')).toMatchObject({
      backend: 'llm-b',
      backends: ['llm-b', 'llm-a'],
      backendUrl: 'http://llm-b.internal:8000/v1',
    });
    const stage = (await tenantAuth.create(
      { tenants: 'tenants' } as never,
      createTestEnv({ resources: { tenants: dir } }),
    )) as StageInstance;
    const answer: Stage = async (ctx) => {
      ctx.body = { upstream: ctx.state.upstream, backend: ctx.state.caller?.attributes?.backend };
    };
    const server = await serveStages([stage.handle, answer], { dialect: openAiDialect });
    cleanups.push(server.close);
    const res = await fetch(server.url, { headers: { authorization: 'Bearer sk-multi' } });
    expect(await res.json()).toEqual({ upstream: ['llm-b', 'llm-a'], backend: 'llm-b' });
  });

  it('a list of one is that backend; an unknown name in a list stops the build, naming it', async () => {
    const { dir } = await directory(spec(['llm-a']));
    expect(dir.get('multi')).toMatchObject({ backend: 'llm-a', backends: ['llm-a'] });
    await expect(directory(spec(['llm-a', 'nope']))).rejects.toThrow(
      /tenant "multi": backend: unknown upstream "nope"/,
    );
  });
});

describe('tenant-auth (openai dialect)', () => {
  let dir: TenantDirectory;
  beforeAll(async () => {
    ({ dir } = await directory(fileOptions, globexKey));
  });

  async function serve(options: Record<string, unknown> = {}) {
    const env = createTestEnv({ resources: { tenants: dir } });
    const stage = (await tenantAuth.create({ tenants: 'tenants', ...options } as never, env)) as StageInstance;
    const answer: Stage = async (ctx) => {
      ctx.body = { caller: ctx.state.caller, upstream: ctx.state.upstream };
    };
    const server = await serveStages([stage.handle, answer], { dialect: openAiDialect });
    cleanups.push(server.close);
    return { env, get: (headers: Record<string, string> = {}) => fetch(server.url, { headers }) };
  }

  it('answers 401 authentication_error for a missing key, with a Bearer challenge', async () => {
    const { get } = await serve();
    const res = await get();
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="test"');
    expect(await res.json()).toEqual({
      error: {
        message: 'Missing API key: send it as "Authorization: Bearer <key>"',
        type: 'authentication_error',
        code: null,
        details: { header: 'Authorization' },
      },
    });
  });

  it('answers 401 for an unknown key or another scheme, never echoing what was sent', async () => {
    const { get, env } = await serve();
    const wrong = await get({ Authorization: 'Bearer sk-not-a-tenant-key' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe('Bearer realm="test", error="invalid_token"');
    const body = await wrong.json();
    expect(body.error).toMatchObject({ message: 'Invalid API key', type: 'authentication_error' });
    expect(JSON.stringify(body)).not.toContain('sk-not-a-tenant-key');

    const basic = await get({ Authorization: 'Basic acme-secret-key' });
    expect(basic.status).toBe(401);
    const basicBody = await basic.json();
    expect(basicBody.error.message).toBe('Invalid Authorization header: expected "Bearer <key>"');
    expect(JSON.stringify(basicBody)).not.toContain('acme-secret-key');

    const text = await env.metrics.registry.getSingleMetricAsString('switchyard_tenant_auth_failures_total');
    expect(text).toContain('switchyard_tenant_auth_failures_total{reason="invalid"} 2');
  });

  it('makes the tenant the caller and its backend the upstream of the request', async () => {
    const { get } = await serve();
    const res = await get({ Authorization: 'bearer  acme-secret-key ' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      caller: {
        id: 'acme',
        authenticated: true,
        attributes: {
          tenant: 'acme',
          policy: 'default.yaml',
          classifiers: ['pii', 'injection'],
          requests_per_minute: 3,
          backend: 'llm-a',
        },
      },
      upstream: 'llm-a',
    });
    const globex = await (await get({ Authorization: 'Bearer globex-key-from-env' })).json();
    expect(globex).toMatchObject({ caller: { id: 'globex' }, upstream: 'llm-b' });
  });

  it('reads a raw key from another header when told to', async () => {
    const { get } = await serve({ header: 'X-Api-Key' });
    expect((await get({ 'X-Api-Key': 'initech-dev-key' })).status).toBe(200);
    const missing = await get({ Authorization: 'Bearer initech-dev-key' });
    expect(missing.status).toBe(401);
    expect((await missing.json()).error.message).toBe('Missing API key in header X-Api-Key');
    expect(missing.headers.get('www-authenticate')).toBeNull();
  });

  it('refuses a resource that is not a tenant directory', async () => {
    const env = createTestEnv({ resources: { tenants: {} } });
    expect(() => tenantAuth.create({ tenants: 'tenants', header: 'Authorization' }, env)).toThrow(
      'resource "tenants" is not a tenant-directory',
    );
  });
});

describe('tenants-api with a shared rate-limiter', () => {
  let dir: TenantDirectory;
  let limiter: Limiter;
  let url: string;
  beforeAll(async () => {
    ({ dir } = await directory(fileOptions, globexKey));
    const made = await rateLimiter.create(
      { limit: 60, window_seconds: 60, backend: 'memory', redis_url: '', insurance: true },
      createTestEnv(),
    );
    limiter = made.value;
    const env = createTestEnv({ resources: { tenants: dir, limits: limiter } });
    const auth = (await tenantAuth.create({ tenants: 'tenants', header: 'Authorization' }, env)) as StageInstance;
    const limit = (await rateLimit.create(
      { limiter: 'limits', key: 'caller', limit_from: 'caller.attributes.requests_per_minute' } as never,
      env,
    )) as StageInstance;
    const list = (await tenantsApi.create({ tenants: 'tenants', op: 'list' } as never, env)) as StageInstance;
    const info = (await tenantsApi.create(
      { tenants: 'tenants', op: 'info', limiter: 'limits' } as never,
      env,
    )) as StageInstance;
    // One server, routed by path as a service would.
    const router: Stage = async (ctx, next) => {
      if (ctx.path === '/admin/tenants') return list.handle(ctx, next);
      if (ctx.path === '/admin/tenant-info') return info.handle(ctx, next);
      const answer = async () => {
        ctx.body = { ok: true };
      };
      await auth.handle(ctx, () => limit.handle(ctx, answer));
    };
    const server = await serveStages([router], { dialect: openAiDialect });
    url = server.url;
    return () => server.close();
  });

  const tenantInfo = async (id?: string) => {
    const res = await fetch(`${url}/admin/tenant-info`, { headers: id ? { 'X-Tenant-ID': id } : {} });
    return { status: res.status, body: await res.json() };
  };

  it('lists the tenants with their backend URL and policy', async () => {
    const res = await fetch(`${url}/admin/tenants`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      tenants: [
        { id: 'acme', backend: 'http://127.0.0.1:11434/v1', policy: 'default.yaml' },
        { id: 'globex', backend: 'http://llm-b.internal:8000/v1', policy: 'strict.yaml' },
        { id: 'initech', backend: 'http://127.0.0.1:11434/v1', policy: 'default.yaml' },
      ],
    });
  });

  it('reports a tenant, its classifiers and what is left of its minute, without counting', async () => {
    const before = await tenantInfo('globex');
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({
      tenant: 'globex',
      backend: 'http://llm-b.internal:8000/v1',
      policy: 'strict.yaml',
      rate_limit: { requests_per_minute: 5, remaining: 5 },
      classifiers: ['pii'],
    });
    expect((await tenantInfo('globex')).body.rate_limit.remaining).toBe(5);

    const sent = Date.now();
    for (const expected of [4, 3]) {
      const res = await fetch(url, { headers: { Authorization: 'Bearer globex-key-from-env' } });
      expect(res.status).toBe(200);
      const { body } = await tenantInfo('globex');
      expect(body.rate_limit.remaining).toBe(expected);
      // reset_at: ISO 8601, the end of the minute that started with the first request.
      expect(body.rate_limit.reset_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const reset = Date.parse(body.rate_limit.reset_at);
      expect(reset).toBeGreaterThanOrEqual(sent + 58_000);
      expect(reset).toBeLessThanOrEqual(sent + 62_000);
    }
    // Another tenant's count is its own.
    expect((await tenantInfo('acme')).body.rate_limit).toMatchObject({ requests_per_minute: 3, remaining: 3 });
  });

  it('answers 400 naming the header when X-Tenant-ID is missing, 404 for an unknown tenant', async () => {
    expect(await tenantInfo()).toEqual({
      status: 400,
      body: {
        error: {
          message: 'Missing header X-Tenant-ID',
          type: 'invalid_request',
          code: null,
          details: { header: 'X-Tenant-ID' },
        },
      },
    });
    const unknown = await tenantInfo('hooli');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ message: 'Unknown tenant "hooli"', details: { tenant: 'hooli' } });
  });

  it('without a limiter reports a full minute', async () => {
    const env = createTestEnv({ resources: { tenants: dir } });
    const info = (await tenantsApi.create({ tenants: 'tenants', op: 'info' } as never, env)) as StageInstance;
    const server = await serveStages([info.handle], { dialect: openAiDialect });
    cleanups.push(server.close);
    const body = await (await fetch(server.url, { headers: { 'X-Tenant-ID': 'acme' } })).json();
    expect(body.rate_limit).toMatchObject({ requests_per_minute: 3, remaining: 3 });
  });
});
