/**
 * The user stages, all over a `user-directory` resource. When the directory is disabled the
 * user routes answer 404 (as if they did not exist) and `user-guard` lets every request pass.
 *
 *   user-create   POST /users/   {username, email, full_name, password} → the user (the first is a superuser)
 *   user-token    POST /token    OAuth2 password flow: form (or JSON) username + password →
 *                                {access_token, token_type: "bearer"}
 *   user-current  GET /users/me  the user of the bearer token
 *   user-activation  POST /users/{user_id}/deactivate (or /activate), superusers only → the user
 *   user-guard    in front of a route: `require: user` (any active user) or `superuser`
 *
 * Statuses: no or bad token 401 (`WWW-Authenticate: Bearer`), wrong credentials 401, an
 * authenticated user without the permission 403, an inactive user 403, too many failed logins
 * 429 (login-throttle.ts).
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  readBody,
  readJson,
  respond,
} from '../../runtime/index.ts';
import {
  describeStage,
  errorResponse,
  jsonResponse,
  ref,
  validationResponse,
  validationSchemas,
} from '../openapi/api.ts';
import { type FieldSpecs, issue, validateBody, validationError } from '../records/api.ts';
import type { PublicUser, UserDirectory } from './api.ts';
import { LoginThrottle, throttleOptionsSchema } from './login-throttle.ts';

declare module '../../runtime/index.ts' {
  interface GatewayState {
    /** The user a `user-guard` or `user-current` stage authenticated. */
    user?: PublicUser;
  }
}

const directoryOption = {
  type: 'string',
  'x-ref': 'resource',
  description: 'A user-directory resource.',
} as const satisfies JsonSchema;

/** The options of user-create and user-current: the directory only. */
const directoryOnly = {
  type: 'object',
  additionalProperties: false,
  required: ['users'],
  properties: { users: directoryOption },
} as const satisfies JsonSchema;

const tokenSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['users'],
  properties: { users: directoryOption, throttle: throttleOptionsSchema },
} as const satisfies JsonSchema;

const activationSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['users', 'active'],
  properties: {
    users: directoryOption,
    active: { type: 'boolean', description: 'false: deactivate; true: activate again.' },
    id_param: { type: 'string', default: 'user_id', description: 'Path parameter holding the user id.' },
  },
} as const satisfies JsonSchema;

const guardSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['users'],
  properties: { users: directoryOption, require: { enum: ['user', 'superuser'], default: 'user' } },
} as const satisfies JsonSchema;

const notFound = () => new GatewayError('not_found', 'Not Found');
const unauthenticated = (message = 'Not authenticated') =>
  new GatewayError('unauthorized', message, { headers: { 'WWW-Authenticate': 'Bearer' } });
const forbidden = (message = 'Not enough permissions') => new GatewayError('forbidden', message);

function bearer(ctx: GatewayContext): string | undefined {
  const m = /^Bearer[ \t]+(\S+)\s*$/i.exec(ctx.get('authorization'));
  return m?.[1];
}

/** The authenticated user, or undefined when no token was sent; 401 for a bad token, 403 when inactive. */
async function currentUser(
  ctx: GatewayContext,
  users: UserDirectory,
  required: boolean,
): Promise<PublicUser | undefined> {
  const token = bearer(ctx);
  if (!token) {
    if (required) throw unauthenticated();
    return undefined;
  }
  const user = await users.userForToken(token);
  if (!user) throw unauthenticated('Could not validate credentials');
  if (!user.is_active) throw forbidden('Inactive user');
  ctx.state.user = user;
  ctx.state.caller = { id: `user:${user.id}`, authenticated: true, attributes: { superuser: user.is_superuser } };
  return user;
}

const userFields: FieldSpecs = {
  username: { type: 'string', required: true, min_length: 3, max_length: 64 },
  email: { type: 'string', required: true, max_length: 254 },
  full_name: { type: 'string', nullable: true, max_length: 200 },
  password: { type: 'string', required: true, min_length: 8, max_length: 256 },
};
const USERNAME = /^[A-Za-z0-9_.@-]+$/;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export const userCreate = definePlugin<FromSchema<typeof directoryOnly>>({
  name: 'user-create',
  description: 'Create a user (the first one is a superuser); 404 when users are disabled.',
  options: directoryOnly,
  create(options, env) {
    const users = env.resource<UserDirectory>(options.users);
    return async (ctx) => {
      if (!users.enabled) throw notFound();
      // Who sends it (401 for a bad token). The rule itself (after the first user, superusers
      // only) is checked again inside the creating transaction: this early check only keeps the
      // order of answers (401 before 422) and refuses most requests before any hashing.
      const creator = await currentUser(ctx, users, false);
      if (users.registration === 'superuser' && !creator?.is_superuser && (await users.count()) > 0) {
        if (!creator) throw unauthenticated();
        throw forbidden();
      }
      const { value, issues } = validateBody(userFields, await readJson(ctx), 'create');
      if (typeof value.username === 'string' && !USERNAME.test(value.username))
        issues.push(
          issue(
            'string_pattern_mismatch',
            ['body', 'username'],
            "String should match pattern '^[A-Za-z0-9_.@-]+$'",
            value.username,
          ),
        );
      if (typeof value.email === 'string' && !EMAIL.test(value.email))
        issues.push(issue('value_error', ['body', 'email'], 'value is not a valid email address', value.email));
      if (issues.length > 0) throw validationError(issues);
      respond(
        ctx,
        await users.register(value as Parameters<UserDirectory['register']>[0], {
          requestId: ctx.state.requestId,
          creator,
        }),
      );
    };
  },
});

export const userToken = definePlugin<FromSchema<typeof tokenSchema>>({
  name: 'user-token',
  description: 'OAuth2 password flow: form-encoded (or JSON) username and password → {access_token, token_type}.',
  options: tokenSchema,
  create(options, env) {
    const users = env.resource<UserDirectory>(options.users);
    const throttle = new LoginThrottle(options.throttle);
    return async (ctx) => {
      if (!users.enabled) throw notFound();
      let fields: Record<string, unknown>;
      if (ctx.is('application/x-www-form-urlencoded')) {
        const form = new URLSearchParams((await readBody(ctx)).toString('utf8'));
        fields = Object.fromEntries(form);
      } else {
        // JSON, and only JSON besides the OAuth2 form: a `text/plain` body that reads as a form, or
        // a body with no type, is what a page on another site posts without a preflight (415).
        fields = (await readJson(ctx)) as Record<string, unknown>;
      }
      const spec: FieldSpecs = {
        username: { type: 'string', required: true, max_length: 256 },
        password: { type: 'string', required: true, max_length: 256 },
      };
      const input = fields && typeof fields === 'object' && !Array.isArray(fields) ? fields : {};
      // The form's other OAuth2 fields are allowed and ignored (grant_type must say password).
      const { username, password, grant_type } = input as Record<string, unknown>;
      const { issues } = validateBody(spec, { username, password }, 'create');
      if (grant_type !== undefined && grant_type !== 'password')
        issues.push(
          issue(
            'string_pattern_mismatch',
            ['body', 'grant_type'],
            "String should match pattern '^password$'",
            grant_type,
          ),
        );
      if (issues.length > 0) throw validationError(issues);
      // Refused before the password is checked: a throttled guess costs no scrypt either.
      await throttle.check(username as string, ctx.ip);
      const user = await users.authenticate(username as string, password as string);
      if (!user) {
        await throttle.failed(username as string, ctx.ip);
        throw unauthenticated('Incorrect username or password');
      }
      await throttle.succeeded(username as string);
      if (!user.is_active) throw forbidden('Inactive user');
      respond(ctx, { access_token: users.issueToken(user), token_type: 'bearer' });
    };
  },
});

export const userCurrent = definePlugin<FromSchema<typeof directoryOnly>>({
  name: 'user-current',
  description: 'The user of the bearer token; 404 when users are disabled.',
  options: directoryOnly,
  create(options, env) {
    const users = env.resource<UserDirectory>(options.users);
    return async (ctx) => {
      if (!users.enabled) throw notFound();
      respond(ctx, await currentUser(ctx, users, true));
    };
  },
});

export const userActivation = definePlugin<FromSchema<typeof activationSchema>>({
  name: 'user-activation',
  description:
    "Deactivate (or activate) a user, superusers only: the user's tokens stop (or start) working at once; 404 when users are disabled.",
  options: activationSchema,
  create(options, env) {
    const users = env.resource<UserDirectory>(options.users);
    const param = options.id_param;
    return async (ctx) => {
      if (!users.enabled) throw notFound();
      const actor = await currentUser(ctx, users, true);
      if (!actor?.is_superuser) throw forbidden();
      const raw = String(ctx.params?.[param] ?? '');
      if (!/^\d{1,15}$/.test(raw)) {
        throw validationError([
          issue(
            'int_parsing',
            ['path', param],
            'Input should be a valid integer, unable to parse string as an integer',
            raw,
          ),
        ]);
      }
      const id = Number(raw);
      // Deactivating oneself would lock the last superuser out for good.
      if (!options.active && id === actor.id)
        throw new GatewayError('bad_request', 'Superusers cannot deactivate themselves');
      const user = await users.setActive(id, options.active, ctx.state.requestId);
      if (!user) throw new GatewayError('not_found', 'User not found');
      respond(ctx, user);
    };
  },
});

export const userGuard = definePlugin<FromSchema<typeof guardSchema>>({
  name: 'user-guard',
  description: 'Require a signed-in user (or a superuser) for the route; passes everything when users are disabled.',
  provides: ['user', 'caller'],
  options: guardSchema,
  create(options, env) {
    const users = env.resource<UserDirectory>(options.users);
    const superuser = options.require === 'superuser';
    return async (ctx, next) => {
      if (users.enabled) {
        const user = await currentUser(ctx, users, true);
        if (superuser && !user?.is_superuser) throw forbidden();
      }
      await next();
    };
  },
});

const userSchema = {
  type: 'object',
  title: 'User',
  required: ['id', 'username', 'email', 'full_name', 'is_active', 'is_superuser', 'created_at'],
  properties: {
    id: { type: 'integer' },
    username: { type: 'string' },
    email: { type: 'string', format: 'email' },
    full_name: { type: ['string', 'null'] },
    is_active: { type: 'boolean' },
    is_superuser: { type: 'boolean' },
    created_at: { type: 'string', format: 'date-time' },
  },
};
const userCreateSchema = {
  type: 'object',
  title: 'UserCreate',
  additionalProperties: false,
  required: ['username', 'email', 'password'],
  properties: {
    username: { type: 'string', minLength: 3, maxLength: 64, pattern: '^[A-Za-z0-9_.@-]+$' },
    email: { type: 'string', format: 'email', maxLength: 254 },
    full_name: { type: ['string', 'null'], maxLength: 200 },
    password: { type: 'string', minLength: 8, maxLength: 256, writeOnly: true },
  },
};
const securitySchemes = {
  OAuth2PasswordBearer: { type: 'oauth2', flows: { password: { tokenUrl: 'token', scopes: {} } } },
};
const dir = (raw: unknown, ctx: { resource<T>(n: string): T }) =>
  ctx.resource<UserDirectory>((raw as { users: string }).users);
const secured = { security: [{ OAuth2PasswordBearer: [] }] };
const unauthorized = errorResponse('Not authenticated');

describeStage('user-create', (raw, ctx) => {
  const users = dir(raw, ctx);
  if (!users.enabled) return { hide: true };
  const closed = users.registration === 'superuser';
  return {
    schemas: { ...validationSchemas, User: userSchema, UserCreate: userCreateSchema },
    securitySchemes,
    operation: {
      tags: ['users'],
      summary: 'Create user',
      description: closed
        ? 'The first user is a superuser and needs no token; after that only a superuser may create users.'
        : 'Anyone may register; the first user is a superuser.',
      requestBody: { required: true, content: { 'application/json': { schema: ref('UserCreate') } } },
      responses: {
        200: jsonResponse('The user', ref('User')),
        400: errorResponse('Username or email already registered'),
        ...(closed ? { 401: unauthorized, 403: errorResponse('Not a superuser') } : {}),
        422: validationResponse,
      },
      ...(closed ? secured : {}),
    },
  };
});

describeStage('user-token', (raw, ctx) => {
  if (!dir(raw, ctx).enabled) return { hide: true };
  return {
    schemas: validationSchemas,
    operation: {
      tags: ['users'],
      summary: 'Login for access token',
      description: 'OAuth2 password flow. The token is an HS256 JWT; send it as `Authorization: Bearer <token>`.',
      requestBody: {
        required: true,
        content: {
          'application/x-www-form-urlencoded': {
            schema: {
              type: 'object',
              required: ['username', 'password'],
              properties: {
                grant_type: { type: 'string', const: 'password' },
                username: { type: 'string' },
                password: { type: 'string', format: 'password' },
              },
            },
          },
        },
      },
      responses: {
        200: jsonResponse('A bearer token', {
          type: 'object',
          required: ['access_token', 'token_type'],
          properties: { access_token: { type: 'string' }, token_type: { type: 'string', const: 'bearer' } },
        }),
        401: errorResponse('Incorrect username or password'),
        422: validationResponse,
        429: errorResponse('Too many failed logins for this account or from this address (Retry-After)'),
      },
    },
  };
});

describeStage('user-current', (raw, ctx) => {
  if (!dir(raw, ctx).enabled) return { hide: true };
  return {
    schemas: { User: userSchema, HTTPError: validationSchemas.HTTPError },
    securitySchemes,
    operation: {
      tags: ['users'],
      summary: 'Current user',
      responses: { 200: jsonResponse('The user', ref('User')), 401: unauthorized },
      ...secured,
    },
  };
});

describeStage('user-guard', (raw, ctx) => {
  if (!dir(raw, ctx).enabled) return undefined;
  const superuser = (raw as { require?: string }).require === 'superuser';
  return {
    schemas: { HTTPError: validationSchemas.HTTPError },
    securitySchemes,
    operation: {
      ...secured,
      description: superuser ? 'Needs a superuser.' : 'Needs a signed-in user.',
      responses: { 401: unauthorized, 403: errorResponse(superuser ? 'Not a superuser' : 'Inactive user') },
    },
  };
});

describeStage('user-activation', (raw, ctx) => {
  if (!dir(raw, ctx).enabled) return { hide: true };
  const o = raw as { active: boolean; id_param?: string };
  return {
    schemas: { ...validationSchemas, User: userSchema },
    securitySchemes,
    operation: {
      tags: ['users'],
      summary: o.active ? 'Activate user' : 'Deactivate user',
      description: o.active
        ? 'Superusers only. The user may log in again; tokens it still holds work again.'
        : 'Superusers only. The user can no longer log in (403) and every token it holds is refused at once (403 Inactive user).',
      parameters: [{ name: o.id_param, in: 'path', required: true, schema: { type: 'integer' } }],
      responses: {
        200: jsonResponse('The user', ref('User')),
        400: errorResponse('Superusers cannot deactivate themselves'),
        401: unauthorized,
        403: errorResponse('Not a superuser'),
        404: errorResponse('User not found'),
        422: validationResponse,
      },
      ...secured,
    },
  };
});
