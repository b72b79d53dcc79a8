/**
 * The ranking service with AUTH_ENABLED=true: users, OAuth2 password login, bearer tokens, and
 * who may do what (reads public, writes need a user, deletes a superuser); and readiness when
 * its PostgreSQL is down.
 */
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EntityJson, type Ranking, startRanking } from './ranking-helpers.ts';

const secret = 'test-secret-0123456789abcdef0123456789';

describe('ranking service with users (AUTH_ENABLED=true)', () => {
  let r: Ranking;
  beforeAll(async () => {
    r = await startRanking('sqlite', { AUTH_ENABLED: 'true', RANK_AUTH_SECRET: secret });
  });
  afterAll(() => r?.close());

  const login = (username: string, password: string) =>
    r.send('POST', '/token', new URLSearchParams({ grant_type: 'password', username, password }).toString(), {
      'content-type': 'application/x-www-form-urlencoded',
    });
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  let admin = '';
  let alice = '';

  it('makes the first user a superuser, without a token', async () => {
    const user = await r.json<Record<string, unknown>>('POST', '/users/', {
      username: 'root',
      email: 'root@example.org',
      full_name: 'Root',
      password: 'correct horse battery',
    });
    expect(user).toEqual({
      id: user.id,
      username: 'root',
      email: 'root@example.org',
      full_name: 'Root',
      is_active: true,
      is_superuser: true,
      created_at: user.created_at,
    });
    expect(JSON.stringify(user)).not.toMatch(/password|scrypt/);
  });

  it('logs in with the OAuth2 password flow', async () => {
    const res = await login('root', 'correct horse battery');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { access_token: string; token_type: string };
    expect(body.token_type).toBe('bearer');
    expect(body.access_token.split('.')).toHaveLength(3);
    admin = body.access_token;
    const wrong = await login('root', 'wrong password');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe('Bearer');
    expect(await wrong.json()).toEqual({ detail: 'Incorrect username or password' });
    expect((await login('nobody', 'whatever1')).status).toBe(401);
    // JSON credentials work too; missing fields are 422.
    expect((await r.send('POST', '/token', { username: 'root', password: 'correct horse battery' })).status).toBe(200);
    expect(
      (await r.send('POST', '/token', 'username=root', { 'content-type': 'application/x-www-form-urlencoded' })).status,
    ).toBe(422);
  });

  it('lets only a superuser create further users', async () => {
    const alicePayload = { username: 'alice', email: 'alice@example.org', full_name: null, password: 'alice-password' };
    expect((await r.send('POST', '/users/', alicePayload)).status).toBe(401);
    const made = await r.json<{ is_superuser: boolean }>('POST', '/users/', alicePayload, 200, bearer(admin));
    expect(made.is_superuser).toBe(false);
    expect(await r.json('POST', '/users/', alicePayload, 400, bearer(admin))).toEqual({
      detail: 'Username already registered',
    });
    expect(await r.json('POST', '/users/', { ...alicePayload, username: 'alice2' }, 400, bearer(admin))).toEqual({
      detail: 'Email already registered',
    });
    const bad = await r.json<{ detail: Array<{ loc: string[] }> }>(
      'POST',
      '/users/',
      { username: 'x y', email: 'nope', password: 'short' },
      422,
      bearer(admin),
    );
    expect(bad.detail.map((d) => d.loc.join('.')).sort()).toEqual(['body.email', 'body.password', 'body.username']);
    alice = ((await (await login('alice', 'alice-password')).json()) as { access_token: string }).access_token;
    expect(
      (await r.send('POST', '/users/', { ...alicePayload, username: 'bob', email: 'b@example.org' }, bearer(alice)))
        .status,
    ).toBe(403);
  });

  it('answers the current user', async () => {
    expect(await r.json('GET', '/users/me', undefined, 200, bearer(alice))).toMatchObject({
      username: 'alice',
      is_superuser: false,
    });
    const none = await r.get('/users/me');
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ detail: 'Not authenticated' });
    expect((await r.get('/users/me', bearer(`${alice}x`))).status).toBe(401);
    expect((await r.get('/users/me', { authorization: 'Basic cm9vdDpyb290' })).status).toBe(401);
  });

  it('keeps reads public, writes for users, deletes for superusers', async () => {
    expect((await r.send('POST', '/entities/', { name: 'anonymous' })).status).toBe(401);
    const a = await r.json<EntityJson>('POST', '/entities/', { name: 'A' }, 200, bearer(alice));
    const b = await r.json<EntityJson>('POST', '/entities/', { name: 'B' }, 200, bearer(alice));
    expect((await r.get('/entities/')).status).toBe(200);
    expect((await r.get(`/entities/${a.id}`)).status).toBe(200);
    expect((await r.get('/leaderboard/')).status).toBe(200);
    expect((await r.get('/mab/next-comparison/')).status).toBe(200);
    const body = { entity1_id: a.id, entity2_id: b.id, selected_entity_id: a.id };
    expect((await r.send('POST', '/comparisons/', body)).status).toBe(401);
    expect((await r.send('POST', '/comparisons/', body, bearer(alice))).status).toBe(200);
    expect((await r.send('POST', '/mab/update/', body)).status).toBe(401);
    expect((await r.send('PATCH', `/entities/${a.id}`, { name: 'A2' })).status).toBe(401);
    expect((await r.send('PATCH', `/entities/${a.id}`, { name: 'A2' }, bearer(alice))).status).toBe(200);
    const denied = await r.send('DELETE', `/entities/${b.id}`, undefined, bearer(alice));
    expect(denied.status).toBe(403);
    expect(await denied.json()).toEqual({ detail: 'Not enough permissions' });
    expect((await r.send('DELETE', `/entities/${b.id}`)).status).toBe(401);
    expect((await r.send('DELETE', `/entities/${b.id}`, undefined, bearer(admin))).status).toBe(200);
  });

  it('refuses a token signed with another secret', async () => {
    const other = await startRanking('sqlite', { AUTH_ENABLED: 'true', RANK_AUTH_SECRET: `${secret}-other` });
    try {
      await other.json('POST', '/users/', { username: 'root', email: 'r@example.org', password: 'password-123' });
      expect((await other.get('/users/me', bearer(admin))).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('documents the user routes and the bearer scheme', async () => {
    const doc = await r.json<{
      paths: Record<string, Record<string, { security?: unknown }>>;
      components: { securitySchemes: unknown };
    }>('GET', '/openapi.json');
    expect(doc.paths['/token']?.post).toBeDefined();
    expect(doc.paths['/users/me']?.get?.security).toEqual([{ OAuth2PasswordBearer: [] }]);
    expect(doc.paths['/entities/']?.post?.security).toEqual([{ OAuth2PasswordBearer: [] }]);
    expect(doc.paths['/entities/']?.get?.security).toBeUndefined();
    expect(doc.components.securitySchemes).toEqual({
      OAuth2PasswordBearer: { type: 'oauth2', flows: { password: { tokenUrl: 'token', scopes: {} } } },
    });
  });
});

describe('readiness with PostgreSQL down', () => {
  let r: Ranking;
  beforeAll(async () => {
    // A port nothing listens on: bind one, then free it.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    r = await startRanking('postgres', { RANK_DB_URL: `postgres://postgres@127.0.0.1:${port}/test` });
  });
  afterAll(() => r?.close());

  it('is alive but not ready, and store calls answer 503', async () => {
    expect((await r.get('/health')).status).toBe(200);
    const ready = await r.get('/health/ready');
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'not_ready', checks: { database: 'error' } });
    expect((await r.get('/entities/')).status).toBe(503);
    expect(
      (await r.send('POST', '/comparisons/', { entity1_id: 1, entity2_id: 2, selected_entity_id: 1 })).status,
    ).toBe(503);
    // Validation comes first and needs no database.
    expect((await r.send('POST', '/entities/', { name: '' })).status).toBe(422);
  });
});
