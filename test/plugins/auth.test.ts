import { Writable } from 'node:stream';
import { Ajv2020 } from 'ajv/dist/2020.js';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import auth, { type AuthOptions } from '../../plugins/auth/index.ts';
import type { PluginEnv, Stage, StageInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** The stage behind a real Koa server, errors rendered by the simple dialect; answers with the caller. */
async function serve(options: Partial<AuthOptions>, env: PluginEnv = createTestEnv()) {
  const stage = (await auth.create(options as AuthOptions, env)) as StageInstance;
  const answerCaller: Stage = async (ctx) => {
    ctx.body = { ok: true, caller: ctx.state.caller ?? null };
  };
  const server = await serveStages([stage.handle, answerCaller]);
  closers.push(server.close);
  return {
    stage,
    get: (path: string, headers: Record<string, string> = {}) => fetch(server.url + path, { headers }),
  };
}

const proxyToken = { token_header: 'X-Proxy-Token', tokens: ['s3cret-token'] };

describe('auth with a custom header and accept_bearer (one admin scheme)', () => {
  const admin = { token_header: 'X-Admin-Token', tokens: ['adm1n-token'], accept_bearer: true };

  it('takes the token from the header or from Authorization: Bearer', async () => {
    const { get } = await serve(admin);
    expect((await get('/', { 'X-Admin-Token': 'adm1n-token' })).status).toBe(200);
    expect((await get('/', { Authorization: 'Bearer adm1n-token' })).status).toBe(200);
  });

  it('refuses a wrong Bearer token, a raw token in Authorization, and prefers a wrong header over a right Bearer', async () => {
    const { get } = await serve(admin);
    expect((await get('/', { Authorization: 'Bearer nope' })).status).toBe(401);
    expect((await get('/', { Authorization: 'adm1n-token' })).status).toBe(401);
    // The documented header decides when present: a wrong one is not rescued by another header.
    expect((await get('/', { 'X-Admin-Token': 'nope', Authorization: 'Bearer adm1n-token' })).status).toBe(401);
  });

  it('without accept_bearer, Authorization is ignored', async () => {
    const { get } = await serve({ ...admin, accept_bearer: false });
    expect((await get('/', { Authorization: 'Bearer adm1n-token' })).status).toBe(401);
  });
});

describe('auth with a custom header (X-Proxy-Token)', () => {
  it('refuses a request without the token: 401, clear body, no Bearer challenge', async () => {
    const { get } = await serve(proxyToken);
    const res = await get('/');
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: 'unauthorized',
      message: 'Missing token in header X-Proxy-Token',
      details: { header: 'X-Proxy-Token' },
    });
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('refuses a wrong token, a prefix of the token, and the token with extra characters', async () => {
    const { get } = await serve(proxyToken);
    for (const wrong of ['nope', 's3cret', 's3cret-token-', 'S3CRET-TOKEN', 'Bearer s3cret-token']) {
      const res = await get('/', { 'X-Proxy-Token': wrong });
      expect(res.status, wrong).toBe(401);
      expect(await res.json()).toEqual({
        error: 'unauthorized',
        message: 'Invalid token',
        details: { header: 'X-Proxy-Token' },
      });
    }
  });

  it('lets the right token through, matching the header name case-insensitively, and names the caller', async () => {
    const { get } = await serve(proxyToken);
    const res = await get('/', { 'x-proxy-token': 's3cret-token' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      ok: true,
      caller: { id: 'token-1', authenticated: true, attributes: {} },
    });
  });

  it('accepts any of several tokens and gives each caller its name and attributes', async () => {
    const { get } = await serve({
      token_header: 'X-Proxy-Token',
      tokens: ['first-token', { name: 'ci', token: 'ci-token-ü', attributes: { team: 'build', tier: 2 } }, 'third'],
    });
    const ci = await get('/', { 'X-Proxy-Token': Buffer.from('ci-token-ü').toString('latin1') });
    expect((await ci.json()).caller).toEqual({ id: 'ci', authenticated: true, attributes: { team: 'build', tier: 2 } });
    const third = await get('/', { 'X-Proxy-Token': 'third' });
    expect((await third.json()).caller.id).toBe('token-3');
    const first = await get('/', { 'X-Proxy-Token': 'first-token' });
    expect((await first.json()).caller.id).toBe('token-1');
  });
});

describe('auth with the Bearer scheme (default header Authorization)', () => {
  const bearer = { tokens: [{ name: 'alice', token: 'tok-alice' }] };

  it('challenges a request without a token with WWW-Authenticate: Bearer', async () => {
    const { get } = await serve(bearer);
    const res = await get('/');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="test"');
    expect(await res.json()).toMatchObject({
      error: 'unauthorized',
      message: 'Missing token in header Authorization',
      details: { header: 'Authorization' },
    });
  });

  it('refuses a wrong token or another scheme with error="invalid_token"', async () => {
    const { get } = await serve(bearer);
    for (const value of ['Bearer wrong', 'Basic dG9rLWFsaWNl', 'tok-alice', 'Bearer']) {
      const res = await get('/', { Authorization: value });
      expect(res.status, value).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="test", error="invalid_token"');
      expect((await res.json()).message).toBe('Invalid token');
    }
  });

  it('accepts the token after "Bearer", scheme case-insensitive', async () => {
    const { get } = await serve(bearer);
    for (const value of ['Bearer tok-alice', 'bearer tok-alice', 'BEARER   tok-alice']) {
      const res = await get('/', { Authorization: value });
      expect(res.status, value).toBe(200);
      expect((await res.json()).caller).toEqual({ id: 'alice', authenticated: true, attributes: {} });
    }
  });
});

describe('auth options', () => {
  it('exempts the exact skip_paths only', async () => {
    const { get } = await serve({ ...proxyToken, skip_paths: ['/health'] });
    expect((await get('/health')).status).toBe(200);
    expect((await get('/health/deep')).status).toBe(401);
    expect((await get('/')).status).toBe(401);
  });

  it('does nothing when disabled, even with no tokens configured', async () => {
    const { get } = await serve({ enabled: false, token_header: 'X-Proxy-Token', tokens: [''] });
    const res = await get('/');
    expect(res.status).toBe(200);
    expect((await res.json()).caller).toBeNull();
  });

  it('refuses to start when enabled with no token, an empty token (unset variable) or a duplicated name', async () => {
    const env = createTestEnv();
    await expect(async () => auth.create({ tokens: [] } as unknown as AuthOptions, env)).rejects.toThrow(/no tokens/);
    await expect(async () => auth.create({ tokens: ['ok', ''] } as unknown as AuthOptions, env)).rejects.toThrow(
      /token #2 is empty/,
    );
    await expect(async () =>
      auth.create({ tokens: ['a', { name: 'token-1', token: 'b' }] } as unknown as AuthOptions, env),
    ).rejects.toThrow(/used twice/);
  });

  it('counts failures by reason and never logs a token', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const env = createTestEnv({ logger: pino({ level: 'trace' }, sink) });
    const { get } = await serve({ token_header: 'X-Proxy-Token', tokens: ['configured-secret'] }, env);
    await get('/');
    await get('/', { 'X-Proxy-Token': 'presented-wrong-secret' });
    await get('/', { 'X-Proxy-Token': 'presented-wrong-secret' });
    await get('/', { 'X-Proxy-Token': 'configured-secret' });
    const metrics = await env.metrics.registry.getSingleMetricAsString('switchyard_auth_failures_total');
    expect(metrics).toContain('switchyard_auth_failures_total{reason="missing"} 1');
    expect(metrics).toContain('switchyard_auth_failures_total{reason="invalid"} 2');
    expect(lines.length).toBeGreaterThan(0);
    const logged = lines.join('');
    expect(logged).not.toContain('secret');
  });

  it('describes itself without revealing tokens', async () => {
    const { stage } = await serve({ ...proxyToken, skip_paths: ['/health'] });
    const described = stage.describe?.();
    expect(described).toEqual({
      enabled: true,
      token_header: 'X-Proxy-Token',
      accept_bearer: false,
      tokens: 1,
      skip_paths: ['/health'],
    });
    expect(JSON.stringify(described)).not.toContain('s3cret');
  });
});

describe('auth options schema', () => {
  const validate = new Ajv2020({ allErrors: true, useDefaults: true, strict: true }).compile(auth.options);

  it('fills in the defaults', () => {
    const options: Record<string, unknown> = { tokens: ['a'] };
    expect(validate(options)).toBe(true);
    expect(options).toEqual({
      enabled: true,
      token_header: 'Authorization',
      tokens: ['a'],
      accept_bearer: false,
      skip_paths: [],
    });
  });

  it('accepts strings and {name, token, attributes}; refuses unknown fields', () => {
    expect(validate({ tokens: ['a', { name: 'n', token: 'b', attributes: { x: 1 } }] })).toBe(true);
    expect(validate({ tokens: [{ name: 'n' }] })).toBe(false);
    expect(validate({ tokens: [{ token: 'b', role: 'admin' }] })).toBe(false);
    expect(validate({ header: 'X-Proxy-Token' })).toBe(false);
  });
});
