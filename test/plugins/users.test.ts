/**
 * Password hashing (scrypt), signed bearer tokens (HS256) and the user directory of the users
 * plugin.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from '../../plugins/users/password.ts';
import userDirectory from '../../plugins/users/resource.ts';
import { issueToken, verifyToken } from '../../plugins/users/token.ts';
import { openEntityStore, openSqlDatabase } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

const cheap = { N: 1024, r: 8, p: 1 };

describe('scrypt passwords', () => {
  it('verifies the right password only, with a fresh salt per hash', async () => {
    const h1 = await hashPassword('correct horse', cheap);
    const h2 = await hashPassword('correct horse', cheap);
    expect(h1).toMatch(/^scrypt\$1024\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(h1).not.toBe(h2);
    expect(await verifyPassword('correct horse', h1)).toBe(true);
    expect(await verifyPassword('correct horsf', h1)).toBe(false);
    expect(await verifyPassword('', h1)).toBe(false);
  });

  it('uses the default cost when none is given', async () => {
    expect(await hashPassword('x')).toMatch(/^scrypt\$16384\$8\$1\$/);
  });

  it('treats canonically equal Unicode passwords alike', async () => {
    const h = await hashPassword('caf\u00e9', cheap);
    expect(await verifyPassword('cafe\u0301', h)).toBe(true);
  });

  it('refuses malformed hashes without throwing', async () => {
    for (const bad of [
      '',
      'plain',
      'scrypt$1$2$3',
      'bcrypt$1024$8$1$AA==$AA==',
      'scrypt$x$8$1$AA==$AA==',
      'scrypt$1024$8$1$AA==$AA==',
    ]) {
      expect(await verifyPassword('x', bad)).toBe(false);
    }
  });
});

describe('HS256 tokens', () => {
  const secret = Buffer.from('s'.repeat(32));

  it('round-trips the subject until expiry', () => {
    const now = Date.UTC(2024, 0, 1);
    const token = issueToken('42', secret, 60, now);
    expect(token.split('.')).toHaveLength(3);
    expect(verifyToken(token, secret, now + 59_000)).toMatchObject({ sub: '42', exp: now / 1000 + 60 });
    expect(verifyToken(token, secret, now + 60_000)).toBeUndefined();
  });

  it('refuses another secret, a changed payload, alg none and garbage', () => {
    const token = issueToken('1', secret, 60);
    expect(verifyToken(token, Buffer.from('other'))).toBeUndefined();
    const [h, , s] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ sub: '2', iat: 0, exp: 9e9 })).toString('base64url');
    expect(verifyToken(`${h}.${forged}.${s}`, secret)).toBeUndefined();
    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    expect(verifyToken(`${none}.${forged}.`, secret)).toBeUndefined();
    for (const bad of ['', 'a.b', 'a.b.c', '...', `${h}.!!!.${s}`]) expect(verifyToken(bad, secret)).toBeUndefined();
  });

  it('is a standard HS256 JWT', () => {
    const token = issueToken('7', secret, 60);
    const [h, p, s] = token.split('.');
    expect(JSON.parse(Buffer.from(h!, 'base64url').toString())).toEqual({ alg: 'HS256', typ: 'JWT' });
    expect(createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')).toBe(s);
  });
});

describe('user-directory', () => {
  it('makes exactly one superuser out of simultaneous first registrations, and checks credentials', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'users-'));
    const db = await openSqlDatabase({ driver: 'sqlite', path: join(dir, 'users.db') });
    const store = await openEntityStore(db);
    const env = createTestEnv({ resources: { db: { store } } });
    const instance = await userDirectory.create(
      {
        store: 'db',
        enabled: true,
        entity_type: 'user',
        secret: 'k'.repeat(32),
        token_ttl_seconds: 60,
        registration: 'open',
        scrypt_cost: 1024,
      },
      env,
    );
    const users = instance.value;
    try {
      const made = await Promise.all(
        ['ann', 'bob', 'cid', 'dee', 'eve'].map((u) =>
          users.register({ username: u, email: `${u}@example.org`, full_name: null, password: `${u}-password` }),
        ),
      );
      expect(made.filter((u) => u.is_superuser)).toHaveLength(1);
      expect(await users.count()).toBe(5);
      await expect(
        users.register({ username: 'ann', email: 'x@example.org', full_name: null, password: 'whatever1' }),
      ).rejects.toMatchObject({
        kind: 'bad_request',
      });
      const ann = await users.authenticate('ann', 'ann-password');
      expect(ann?.username).toBe('ann');
      expect(await users.authenticate('ann', 'bob-password')).toBeUndefined();
      expect(await users.authenticate('zed', 'ann-password')).toBeUndefined();
      const token = users.issueToken(ann!);
      expect((await users.userForToken(token))?.id).toBe(ann!.id);
      expect(await users.userForToken(`${token}x`)).toBeUndefined();
    } finally {
      await store.close();
    }
  });
});
