/**
 * auth: token authentication. The token comes in `Authorization: Bearer <token>` (default) or raw
 * in any other header (e.g. `X-Proxy-Token`). A missing or wrong token is `unauthorized` (401);
 * a match sets `ctx.state.caller` to the token's name and attributes. Tokens are never logged.
 */
import { definePlugin, type FromSchema, GatewayError, type JsonSchema } from '../../runtime/index.ts';
import { compileTokens } from './tokens.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    enabled: { type: 'boolean', default: true },
    token_header: {
      type: 'string',
      minLength: 1,
      default: 'Authorization',
      description: '`Authorization` expects `Bearer <token>`; any other header carries the raw token',
    },
    tokens: {
      type: 'array',
      default: [],
      items: {
        oneOf: [
          { type: 'string' },
          {
            type: 'object',
            additionalProperties: false,
            required: ['token'],
            properties: {
              name: { type: 'string', minLength: 1, description: 'Caller id (default `token-<n>`, from 1)' },
              token: { type: 'string' },
              attributes: { type: 'object', description: 'Copied to ctx.state.caller.attributes' },
            },
          },
        ],
      },
    },
    accept_bearer: {
      type: 'boolean',
      default: false,
      description:
        'With a custom token_header: also accept the token as `Authorization: Bearer <token>` when that header is absent ' +
        '(one admin scheme for every admin endpoint, the documented header still accepted)',
    },
    skip_paths: {
      type: 'array',
      items: { type: 'string' },
      default: [],
      description: 'Exact request paths that need no token (e.g. /health)',
    },
  },
} as const satisfies JsonSchema;

export type AuthOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<AuthOptions>({
  name: 'auth',
  description: 'Token authentication (Bearer or a custom header), constant-time comparison',
  // A disabled stage lets every request through without a caller.
  provides: (o) => (o.enabled ? ['caller'] : []),
  options: optionsSchema,
  create(options, env) {
    const enabled = options.enabled;
    const header = options.token_header;
    const bearer = header.toLowerCase() === 'authorization';
    const alsoBearer = !bearer && options.accept_bearer;
    const skip = new Set(options.skip_paths);
    // Tokens are checked only when enabled: an unset ${TOKEN} must not break a disabled stage.
    const tokens = enabled ? compileTokens(options.tokens) : undefined;
    const failures = env.metrics.counter({
      name: 'switchyard_auth_failures_total',
      help: 'Requests refused by token authentication, by reason (missing|invalid)',
      labelNames: ['reason'] as const,
    });
    const realm = `realm="${env.service.name}"`;

    function reject(reason: 'missing' | 'invalid', requestId: string): never {
      failures.inc({ reason });
      env.logger.debug({ request_id: requestId, reason, header }, 'authentication failed');
      const message = reason === 'missing' ? `Missing token in header ${header}` : 'Invalid token';
      // RFC 6750: a Bearer challenge, with `invalid_token` when a token was presented.
      const headers = bearer
        ? { 'WWW-Authenticate': reason === 'missing' ? `Bearer ${realm}` : `Bearer ${realm}, error="invalid_token"` }
        : undefined;
      throw new GatewayError('unauthorized', message, { details: { header }, headers });
    }

    return {
      async handle(ctx, next) {
        if (!tokens || skip.has(ctx.path)) return next();
        let raw = ctx.get(header).trim();
        let asBearer = bearer;
        if (!raw && alsoBearer) {
          raw = ctx.get('authorization').trim();
          asBearer = true;
        }
        if (!raw) reject('missing', ctx.state.requestId);
        let presented = raw;
        if (asBearer) {
          const match = /^Bearer[ \t]+(\S.*)$/i.exec(raw);
          if (!match) reject('invalid', ctx.state.requestId);
          presented = match[1].trim();
        }
        const caller = tokens.match(presented);
        if (!caller) reject('invalid', ctx.state.requestId);
        ctx.state.caller = caller;
        await next();
      },
      describe: () => ({
        enabled,
        token_header: header,
        accept_bearer: alsoBearer,
        tokens: tokens?.count ?? 0,
        skip_paths: [...skip],
      }),
      inactive: !enabled,
    };
  },
});
