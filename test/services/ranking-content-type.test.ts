/**
 * The ranking service (configs/ranking.yaml, users on) refuses the cross-site "simple" POSTs a
 * page on another site can send without a CORS preflight: a `text/plain` body, a form
 * (`application/x-www-form-urlencoded`, `multipart/form-data`) or no Content-Type at all, each
 * carrying valid JSON, to sign-up (POST /users/), login (POST /token) and POST /comparisons/ is
 * 415 in the service's FastAPI-style dialect, and changes nothing; `application/json` still
 * works. The one exception is the login's OAuth2 password flow, whose standard body is a
 * url-encoded form: that form is accepted, nothing else that is not JSON.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EntityJson, type Ranking, startRanking } from './ranking-helpers.ts';

const secret = 'test-secret-0123456789abcdef0123456789';

/** The Content-Types a cross-site page can send without a preflight (`undefined`: none). */
const simpleTypes = [
  'text/plain',
  'text/plain; charset=utf-8',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  undefined,
];

describe('ranking: JSON bodies must be application/json (415 for cross-site simple POSTs)', () => {
  let r: Ranking;
  /** POST `body` (as given) with `type`, or with no Content-Type at all. */
  const post = (path: string, body: string, type: string | undefined, headers: Record<string, string> = {}) =>
    fetch(`${r.url}${path}`, {
      method: 'POST',
      headers: type === undefined ? headers : { 'content-type': type, ...headers },
      // Bytes, not a string: fetch would add `text/plain;charset=UTF-8` to a string body.
      body: new TextEncoder().encode(body),
    });
  const expect415 = async (res: Response) => {
    expect(res.status).toBe(415);
    const body = (await res.json()) as { detail: unknown };
    expect(String(body.detail)).toMatch(/Content-Type/);
  };
  const root = { username: 'root', email: 'root@example.org', full_name: 'Root', password: 'correct horse battery' };
  let token = '';

  beforeAll(async () => {
    r = await startRanking('sqlite', { AUTH_ENABLED: 'true', RANK_AUTH_SECRET: secret });
  });
  afterAll(() => r?.close());

  it('sign-up: a simple POST is 415 and creates no user; application/json signs up (the first user)', async () => {
    for (const type of simpleTypes) await expect415(await post('/users/', JSON.stringify(root), type));
    // Nothing was created: the JSON sign-up is still the first one, hence the superuser.
    const user = await r.json<{ is_superuser: boolean }>('POST', '/users/', root);
    expect(user.is_superuser).toBe(true);
  });

  it('login: JSON or the OAuth2 url-encoded form; text/plain, multipart or no type is 415', async () => {
    const form = new URLSearchParams({ grant_type: 'password', username: 'root', password: root.password }).toString();
    // A text/plain body that reads as a form is not a form.
    for (const type of ['text/plain', 'multipart/form-data; boundary=x', undefined]) {
      await expect415(await post('/token', form, type));
      await expect415(await post('/token', JSON.stringify({ username: 'root', password: root.password }), type));
    }
    const viaForm = await post('/token', form, 'application/x-www-form-urlencoded');
    expect(viaForm.status).toBe(200);
    const viaJson = await r.json<{ access_token: string }>('POST', '/token', {
      username: 'root',
      password: root.password,
    });
    token = viaJson.access_token;
    expect(token.split('.')).toHaveLength(3);
  });

  it('comparisons: a simple POST is 415 (with a valid token too) and records nothing; application/json records', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const entity = (name: string) => r.json<EntityJson>('POST', '/entities/', { name }, 200, auth);
    const [a, b] = [await entity('alpha'), await entity('beta')];
    const comparison = JSON.stringify({ entity1_id: a.id, entity2_id: b.id, selected_entity_id: a.id });
    for (const type of simpleTypes) {
      // What a cross-site page sends (no Authorization: that would need a preflight)...
      const anonymous = await post('/comparisons/', comparison, type);
      expect([401, 415]).toContain(anonymous.status);
      // ...and even with a valid token, a body not declared as JSON is refused.
      await expect415(await post('/comparisons/', comparison, type, auth));
    }
    expect(await r.json<unknown[]>('GET', '/comparisons/')).toEqual([]);
    const recorded = await post('/comparisons/', comparison, 'application/json', auth);
    expect(recorded.status).toBe(200);
    expect((await r.json<unknown[]>('GET', '/comparisons/')).length).toBe(1);
  });
});
