/**
 * The `user-directory` resource: user accounts kept in an `entity-store` (type `user`, keyed by
 * username), passwords hashed with scrypt, bearer tokens signed with HMAC-SHA256 and expiring.
 *
 *   resources:
 *     users: { type: user-directory, store: db, enabled: "${AUTH_ENABLED:-false}", secret: "${AUTH_SECRET:-}" }
 *
 * The first user created is a superuser (decided inside the creating transaction, so two
 * simultaneous first registrations cannot both become one). Without a `secret`, a random one is
 * drawn at start: tokens then stop working at every restart and differ between processes, which
 * is logged as a warning.
 */
import { randomBytes } from 'node:crypto';
import { defineResource, type Entity, type FromSchema, GatewayError, type JsonSchema } from '../../runtime/index.ts';
import type { EntityStoreResource } from '../entity-store/api.ts';
import { writeQueue } from '../records/api.ts';
import type { PublicUser, UserDirectory } from './api.ts';
import { defaultCost, hashPassword, verifyPassword } from './password.ts';
import { issueToken, verifyToken } from './token.ts';

interface StoredUser extends Record<string, unknown> {
  username: string;
  email: string;
  full_name: string | null;
  password_hash: string;
  is_active: boolean;
  is_superuser: boolean;
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['store'],
  properties: {
    store: { type: 'string', 'x-ref': 'resource', description: 'An entity-store resource.' },
    enabled: {
      type: 'boolean',
      default: false,
      description: 'Off: user routes answer 404, guards let every request pass.',
    },
    entity_type: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$', default: 'user' },
    secret: {
      type: 'string',
      description: 'HMAC key of the tokens (at least 32 characters advised); empty: random per process.',
    },
    token_ttl_seconds: { type: 'integer', minimum: 60, default: 1800, description: 'Token lifetime.' },
    registration: {
      enum: ['open', 'superuser'],
      default: 'superuser',
      description: 'Who may create users once the first (superuser) exists: anyone, or superusers only.',
    },
    scrypt_cost: {
      type: 'integer',
      enum: [1024, 2048, 4096, 8192, 16384, 32768, 65536],
      default: 16384,
      description: 'scrypt N.',
    },
  },
} as const satisfies JsonSchema;
type UserDirectoryOptions = FromSchema<typeof optionsSchema>;

export default defineResource<UserDirectoryOptions, UserDirectory>({
  type: 'user-directory',
  description: 'User accounts in an entity store: scrypt passwords, HS256 bearer tokens, first user superuser',
  options: optionsSchema,
  create(options, env) {
    const db = env.resource<EntityStoreResource>(options.store);
    const type = options.entity_type;
    const ttl = options.token_ttl_seconds;
    const cost = { ...defaultCost, N: options.scrypt_cost };
    let secret: Buffer;
    if (options.secret) {
      secret = Buffer.from(options.secret, 'utf8');
    } else {
      secret = randomBytes(32);
      if (options.enabled)
        env.logger.warn(
          'user-directory: no secret configured; tokens are signed with a random key and end with this process',
        );
    }
    // Verified against when the username is unknown, so both cases take the same time.
    const dummy = hashPassword(randomBytes(16).toString('hex'), cost);

    const toPublic = (e: Entity<StoredUser>): PublicUser => ({
      id: e.id,
      username: e.data.username,
      email: e.data.email,
      full_name: e.data.full_name ?? null,
      is_active: e.data.is_active,
      is_superuser: e.data.is_superuser,
      created_at: e.created_at,
    });

    const directory: UserDirectory = {
      enabled: options.enabled,
      registration: options.registration,
      tokenTtlSeconds: ttl,
      async register(input, { requestId, creator } = {}) {
        const password_hash = await hashPassword(input.password, cost);
        const created = await writeQueue(db.store)(() =>
          db.store.transaction(
            async (tx) => {
              // Who may create a user is decided here, with the count this transaction sees:
              // checked before it, twenty simultaneous first sign-ups all passed as "the first".
              const first = (await tx.count(type)) === 0;
              if (!first && directory.registration === 'superuser' && !creator?.is_superuser) {
                throw creator
                  ? new GatewayError('forbidden', 'Not enough permissions')
                  : new GatewayError('unauthorized', 'Not authenticated', {
                      headers: { 'WWW-Authenticate': 'Bearer' },
                    });
              }
              if (await tx.getByKey(type, input.username)) {
                throw new GatewayError('bad_request', 'Username already registered', {
                  details: { field: 'username' },
                });
              }
              const sameEmail = await tx.query(type, {
                filter: { field: 'email', op: 'eq', value: input.email },
                limit: 1,
              });
              if (sameEmail.items.length > 0) {
                throw new GatewayError('bad_request', 'Email already registered', { details: { field: 'email' } });
              }
              const data: StoredUser = { ...input, password_hash, is_active: true, is_superuser: first };
              return tx.create<StoredUser>(type, data, { key: input.username, requestId });
            },
            // serialize: the email check reads rows this transaction does not write.
            { retries: 5, serialize: true },
          ),
        );
        return toPublic(created);
      },
      async authenticate(username, password) {
        const found = await db.store.getByKey<StoredUser>(type, username);
        if (!found) {
          await verifyPassword(password, await dummy);
          return undefined;
        }
        return (await verifyPassword(password, found.data.password_hash)) ? toPublic(found) : undefined;
      },
      issueToken: (user) => issueToken(String(user.id), secret, ttl),
      async userForToken(token) {
        const claims = verifyToken(token, secret);
        if (!claims || !/^\d+$/.test(claims.sub)) return undefined;
        // getMany, not get: get answers from the store's read cache, which sees another
        // process's writes only after a while; a revoked account must be refused at once.
        const [found] = await db.store.getMany<StoredUser>(type, [Number(claims.sub)]);
        return found ? toPublic(found) : undefined;
      },
      async setActive(id, active, requestId) {
        const updated = await writeQueue(db.store)(() =>
          db.store.transaction(
            async (tx) => {
              const [found] = await tx.getMany<StoredUser>(type, [id]);
              if (!found) return undefined;
              if (found.data.is_active === active) return found;
              return tx.update<StoredUser>(
                type,
                id,
                { ...found.data, is_active: active },
                { requestId, ifVersion: found.version },
              );
            },
            { retries: 5 },
          ),
        );
        return updated ? toPublic(updated) : undefined;
      },
      count: () => db.store.count(type),
    };
    return {
      value: directory,
      describe: () => ({ enabled: directory.enabled, registration: directory.registration, token_ttl_seconds: ttl }),
    };
  },
});
