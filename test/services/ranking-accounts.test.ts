/**
 * The ranking service's account safety (AUTH_ENABLED=true), through the real service:
 *
 * - 20 simultaneous first sign-ups on an empty database make exactly one user, the superuser
 *   (SQLite and PostgreSQL): the rule "after the first, superusers only" is decided in the
 *   creating transaction;
 * - a deactivated user's token is refused at once (403), and a deleted user's (401), also when
 *   another process of the same database made the change (no read cache in between); the
 *   deactivate endpoint is for superusers only;
 * - failed logins are throttled per account and per client address: 429 with Retry-After in the
 *   service's dialect, before any password is checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EntityStoreResource } from '../../plugins/entity-store/api.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { backends, config, type Ranking, SCRYPT_COST, startRanking } from './ranking-helpers.ts';

const secret = 'test-secret-0123456789abcdef0123456789';
const auth = { AUTH_ENABLED: 'true', RANK_AUTH_SECRET: secret };

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const form = (username: string, password: string) =>
  new URLSearchParams({ grant_type: 'password', username, password }).toString();
const formHeaders = { 'content-type': 'application/x-www-form-urlencoded' };

async function login(r: Ranking, username: string, password: string): Promise<Response> {
  return r.send('POST', '/token', form(username, password), formHeaders);
}
async function tokenOf(r: Ranking, username: string, password: string): Promise<string> {
  const res = await login(r, username, password);
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

describe.each(backends)('ranking accounts ($driver)', ({ driver, skip }) => {
  it.skipIf(skip)(
    'makes exactly one first user of 20 simultaneous sign-ups',
    async () => {
      const r = await startRanking(driver, { ...auth, RANK_LOGIN_MAX_FAILURES_PER_ADDRESS: '1000' });
      try {
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            r.send('POST', '/users/', {
              username: `racer${i}`,
              email: `racer${i}@example.org`,
              full_name: null,
              password: 'a strong password',
            }),
          ),
        );
        const statuses = answers.map((a) => a.status).sort();
        expect(statuses).toEqual([200, ...Array(19).fill(401)]);
        const winner = answers.find((a) => a.status === 200) as Response;
        const user = (await winner.json()) as { username: string; is_superuser: boolean };
        expect(user.is_superuser).toBe(true);
        for (const loser of answers.filter((a) => a.status === 401)) {
          expect(await loser.json()).toEqual({ detail: 'Not authenticated' });
        }
        // Only the winner exists: every other name is unknown to login.
        for (let i = 0; i < 20; i++) {
          const name = `racer${i}`;
          expect((await login(r, name, 'a strong password')).status, name).toBe(name === user.username ? 200 : 401);
        }
      } finally {
        await r.close();
      }
    },
    60_000,
  );
});

describe('ranking accounts: revocation and throttling (sqlite)', () => {
  let r: Ranking;
  /** A second process of the same database (another worker, another gateway). */
  let other: StartedService;
  let admin = '';
  let aliceId = 0;
  beforeAll(async () => {
    r = await startRanking('sqlite', {
      ...auth,
      RANK_LOGIN_MAX_FAILURES: '3',
      RANK_LOGIN_MAX_FAILURES_PER_ADDRESS: '8',
    });
    other = await startService(config, { env: r.env, set: [`resources.users.scrypt_cost=${SCRYPT_COST}`] });
    await r.json('POST', '/users/', { username: 'root', email: 'root@example.org', password: 'root password' });
    admin = await tokenOf(r, 'root', 'root password');
    const alice = await r.json<{ id: number }>(
      'POST',
      '/users/',
      { username: 'alice', email: 'alice@example.org', password: 'alice password' },
      200,
      bearer(admin),
    );
    aliceId = alice.id;
  });
  afterAll(async () => {
    await other?.close();
    await r?.close();
  });

  const deactivate = (id: number, token: string, path = 'deactivate') =>
    r.send('POST', `/users/${id}/${path}`, undefined, bearer(token));

  it('refuses a deactivated user at once, and lets it in again once activated', async () => {
    const alice = await tokenOf(r, 'alice', 'alice password');
    expect((await r.get('/users/me', bearer(alice))).status).toBe(200);
    expect((await r.send('POST', '/entities/', { name: 'before' }, bearer(alice))).status).toBe(200);

    const res = await deactivate(aliceId, admin);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: aliceId, username: 'alice', is_active: false });
    // The very next request with her token: refused, on every route that needs a user.
    expect(await r.json('GET', '/users/me', undefined, 403, bearer(alice))).toEqual({ detail: 'Inactive user' });
    expect((await r.send('POST', '/entities/', { name: 'after' }, bearer(alice))).status).toBe(403);
    expect(await r.json('POST', '/token', form('alice', 'alice password'), 403, formHeaders)).toEqual({
      detail: 'Inactive user',
    });

    const back = await deactivate(aliceId, admin, 'activate');
    expect(await back.json()).toMatchObject({ is_active: true });
    expect((await r.get('/users/me', bearer(alice))).status).toBe(200);
  });

  it('refuses a user deactivated or deleted by another process of the same database at once', async () => {
    const alice = await tokenOf(r, 'alice', 'alice password');
    // Her user is read (and would be cached) by this process...
    expect((await r.get('/users/me', bearer(alice))).status).toBe(200);
    // ...then another process deactivates her: this one refuses her next request.
    const otherAdmin = await fetch(`${other.url}/users/${aliceId}/deactivate`, {
      method: 'POST',
      headers: bearer(admin),
    });
    expect(otherAdmin.status).toBe(200);
    expect((await r.get('/users/me', bearer(alice))).status).toBe(403);
    await fetch(`${other.url}/users/${aliceId}/activate`, { method: 'POST', headers: bearer(admin) });
    expect((await r.get('/users/me', bearer(alice))).status).toBe(200);

    // Deleted by the other process (no API deletes users: its store does): 401 at once.
    const db = other.runtime.graph.resources.get('db')?.value as EntityStoreResource;
    expect(await db.store.delete('user', aliceId)).toBe(true);
    expect(await r.json('GET', '/users/me', undefined, 401, bearer(alice))).toEqual({
      detail: 'Could not validate credentials',
    });
    expect((await r.send('POST', '/entities/', { name: 'gone' }, bearer(alice))).status).toBe(401);
  });

  it('lets only superusers deactivate, never themselves, and names what is wrong', async () => {
    await r.json(
      'POST',
      '/users/',
      { username: 'bob', email: 'bob@example.org', password: 'bob password' },
      200,
      bearer(admin),
    );
    const bob = await tokenOf(r, 'bob', 'bob password');
    const rootId = ((await r.json('GET', '/users/me', undefined, 200, bearer(admin))) as { id: number }).id;
    expect((await r.send('POST', `/users/${rootId}/deactivate`)).status).toBe(401);
    expect(await r.json('POST', `/users/${rootId}/deactivate`, undefined, 403, bearer(bob))).toEqual({
      detail: 'Not enough permissions',
    });
    expect(await r.json('POST', `/users/${rootId}/deactivate`, undefined, 400, bearer(admin))).toEqual({
      detail: 'Superusers cannot deactivate themselves',
    });
    expect(await r.json('POST', '/users/999999/deactivate', undefined, 404, bearer(admin))).toEqual({
      detail: 'User not found',
    });
    const bad = await r.json<{ detail: Array<{ loc: string[] }> }>(
      'POST',
      '/users/abc/deactivate',
      undefined,
      422,
      bearer(admin),
    );
    expect(bad.detail[0]?.loc).toEqual(['path', 'user_id']);
  });

  it('throttles failed logins per account, with Retry-After, and checks no password then', async () => {
    await r.json(
      'POST',
      '/users/',
      { username: 'carol', email: 'carol@example.org', password: 'carol password' },
      200,
      bearer(admin),
    );
    for (let i = 0; i < 3; i++) expect((await login(r, 'carol', `wrong ${i}`)).status).toBe(401);
    const refused = await login(r, 'carol', 'carol password');
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
    expect(await refused.json()).toEqual({ detail: `Too many failed logins; retry in ${retryAfter} seconds` });
    // Other accounts are not locked by carol's failures.
    expect((await login(r, 'root', 'root password')).status).toBe(200);
  });

  it('throttles failed logins per client address, whatever the account', async () => {
    // 3 failures above; 5 more from this address (on accounts nobody locked) reach its 8.
    for (let i = 0; i < 5; i++) expect((await login(r, `nobody${i}`, 'whatever password')).status).toBe(401);
    const refused = await login(r, 'root', 'root password');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});
