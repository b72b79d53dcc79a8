/**
 * An OAuth 2.1 protected resource, as the MCP authorization specification (revision 2025-11-25)
 * asks of an MCP server: clients discover where to get a token from its metadata (RFC 9728),
 * present an access token issued for this resource (RFC 8707 resource indicator: the token's
 * audience), and the token stays here: it is never passed upstream (token passthrough is
 * forbidden by the specification; the proxy forwards only the headers it names, and not
 * `Authorization`).
 *
 *   - oauth-metadata: answers `GET /.well-known/oauth-protected-resource` (terminal).
 *   - oauth-bearer: checks `Authorization: Bearer <JWT>` against the issuer's JWKS (fetched from
 *     its metadata, cached and refetched when a new key id appears: jose's remote key set; one
 *     discovery at a time, a failure remembered for `failure_cache_ms`: issuer-keys.ts), with
 *     issuer, audience, expiry (and not-before) and the scopes the route requires. A missing or
 *     bad token is 401 with `WWW-Authenticate: Bearer resource_metadata="…", scope="…"`; a token
 *     without a required scope is 403 `insufficient_scope`. Subject, client and scopes go to
 *     `ctx.state.caller` for policies (`caller.attributes.scopes`); a refusal further down that
 *     names the scopes which would lift it (a policy rule's `scopes`) becomes 403
 *     `insufficient_scope` with those scopes in the challenge (step-up).
 */
import { type JWTPayload, errors as joseErrors, jwtVerify } from 'jose';
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  isGatewayError,
  type JsonSchema,
  respond,
} from '../../runtime/index.ts';
import { IssuerKeys, KeysUnavailable } from './issuer-keys.ts';

const commonOptions = {
  // false: the stage lets every request through (and the metadata route answers 404).
  enabled: { type: 'boolean', default: true },
  resource: {
    type: 'string',
    pattern: '^https?://',
    description: "The resource's canonical URL: the audience of its tokens (RFC 8707).",
  },
  issuer: { type: 'string', pattern: '^https?://', description: "The authorization server's issuer identifier." },
  scopes: {
    type: 'array',
    items: { type: 'string', minLength: 1 },
    default: [],
    description: 'Scopes every request needs.',
  },
} as const satisfies Record<string, JsonSchema>;

const metadataSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['resource', 'issuer'],
  properties: commonOptions,
} as const satisfies JsonSchema;

const bearerSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['resource', 'issuer'],
  properties: {
    ...commonOptions,
    jwks_uri: { type: 'string', pattern: '^https?://', description: "Default: the issuer metadata's jwks_uri." },
    // Accepted signature algorithms (never `none`).
    algorithms: {
      type: 'array',
      items: { enum: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] },
      minItems: 1,
      default: ['RS256', 'ES256', 'EdDSA'],
    },
    // Allowed clock skew, seconds.
    clock_tolerance_s: { type: 'integer', minimum: 0, maximum: 300, default: 30 },
    failure_cache_ms: {
      type: 'integer',
      minimum: 0,
      maximum: 300000,
      default: 5000,
      description:
        "After the issuer's metadata or keys could not be fetched, requests are refused (503, Retry-After) " +
        'without asking it again for this long; one fetch is in flight at a time.',
    },
  },
} as const satisfies JsonSchema;
export type OAuthResourceOptions = FromSchema<typeof bearerSchema>;

/** `resource_metadata` URL: the well-known path of the resource's own origin and path (RFC 9728 §3.1). */
function metadataUrl(resource: string): string {
  const u = new URL(resource);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  return `${u.origin}/.well-known/oauth-protected-resource${path}`;
}

export const oauthMetadataPlugin = definePlugin<FromSchema<typeof metadataSchema>>({
  name: 'oauth-metadata',
  description: 'Protected resource metadata (RFC 9728) for GET /.well-known/oauth-protected-resource (terminal).',
  provides: ['answer'],
  options: metadataSchema,
  create(options) {
    const body = {
      resource: options.resource,
      authorization_servers: [options.issuer],
      scopes_supported: options.scopes,
      bearer_methods_supported: ['header'],
    };
    return async (ctx) => {
      if (options.enabled === false) throw new GatewayError('not_found', 'Not found');
      ctx.set('Cache-Control', 'max-age=300');
      respond(ctx, body);
    };
  },
});

export const oauthBearerPlugin = definePlugin<OAuthResourceOptions>({
  name: 'oauth-bearer',
  description:
    'OAuth 2.1 resource server: JWT access tokens checked against the issuer (JWKS), audience, expiry, scopes.',
  provides: (o) => (o.enabled === false ? [] : ['caller']),
  options: bearerSchema,
  create(options, env) {
    const required = options.scopes;
    const resourceMetadata = metadataUrl(options.resource);
    const failures = env.metrics.counter({
      name: 'switchyard_oauth_failures_total',
      help: 'Requests refused by the OAuth resource server, by reason',
      labelNames: ['reason'] as const,
    });
    const fetches = env.metrics.counter({
      name: 'switchyard_oauth_issuer_requests_total',
      help: 'Requests sent to the authorization server for its metadata (discovery) or its keys (jwks)',
      labelNames: ['kind'] as const,
    });
    const keys = new IssuerKeys({
      issuer: options.issuer,
      jwksUri: options.jwks_uri,
      failureCacheMs: options.failure_cache_ms,
      onFetch: (kind) => fetches.inc({ kind }),
    });

    /** RFC 6750 §3 challenge: where the metadata is, the scopes needed, and what was wrong. */
    function challenge(
      error?: 'invalid_token' | 'insufficient_scope',
      description?: string,
      scopes: readonly string[] = required,
    ): string {
      const parts = [`resource_metadata="${resourceMetadata}"`];
      if (scopes.length > 0) parts.push(`scope="${scopes.join(' ')}"`);
      if (error) parts.push(`error="${error}"`);
      if (description) parts.push(`error_description="${description.replace(/["\\]/g, '')}"`);
      return `Bearer ${parts.join(', ')}`;
    }

    function refuse(ctx: GatewayContext, reason: string, description?: string): never {
      failures.inc({ reason });
      env.logger.debug({ request_id: ctx.state.requestId, reason }, 'access token refused');
      const error = reason === 'missing' ? undefined : 'invalid_token';
      throw new GatewayError('unauthorized', description ?? 'A valid access token is required', {
        headers: { 'WWW-Authenticate': challenge(error, description) },
      });
    }

    /**
     * A refusal further down that names the scopes which would lift it (a policy rule's `scopes`,
     * `details.required_scopes`) and that this token lacks: the MCP authorization specification's
     * answer to a request made with too little scope, 403 with `WWW-Authenticate: Bearer
     * error="insufficient_scope", scope="…"` naming every scope the request needs (the route's and
     * the rule's), so that a client can obtain a token that has them and retry (step-up). The body
     * stays the refusal's own (for JSON-RPC, the policy error with the request's id).
     */
    function withScopeChallenge(err: unknown, granted: readonly string[]): unknown {
      if (!isGatewayError(err) || (err.kind !== 'policy_violation' && err.kind !== 'forbidden')) return err;
      const wanted = err.details?.required_scopes;
      if (!Array.isArray(wanted) || !wanted.every((s) => typeof s === 'string')) return err;
      const lacking = wanted.filter((s) => !granted.includes(s));
      if (lacking.length === 0) return err;
      failures.inc({ reason: 'insufficient_scope' });
      const scopes = [...new Set([...required, ...wanted])];
      return new GatewayError(err.kind, err.message, {
        details: err.details,
        code: err.code,
        extra: err.extra,
        status: 403,
        headers: {
          ...err.headers,
          'WWW-Authenticate': challenge(
            'insufficient_scope',
            `This request needs the scope ${lacking.join(' ')}`,
            scopes,
          ),
        },
        rpcId: err.rpcId,
        cause: err,
      });
    }

    return {
      async handle(ctx, next) {
        if (options.enabled === false) return next();
        const raw = ctx.get('authorization').trim();
        if (!raw) refuse(ctx, 'missing');
        const match = /^Bearer[ \t]+([A-Za-z0-9._~+/-]+=*)$/i.exec(raw);
        if (!match) refuse(ctx, 'malformed', 'The Authorization header must be Bearer <token>');
        let payload: JWTPayload;
        try {
          ({ payload } = await jwtVerify(match[1], keys.getKey, {
            issuer: options.issuer,
            audience: options.resource,
            algorithms: options.algorithms,
            clockTolerance: options.clock_tolerance_s,
            requiredClaims: ['exp', 'sub'],
          }));
        } catch (err) {
          if (err instanceof joseErrors.JWTExpired) refuse(ctx, 'expired', 'The access token has expired');
          if (err instanceof joseErrors.JWTClaimValidationFailed) {
            refuse(ctx, `claim_${err.claim}`, `The access token's ${err.claim} claim is not accepted`);
          }
          if (err instanceof joseErrors.JOSEError && !(err instanceof joseErrors.JWKSTimeout)) {
            refuse(ctx, 'invalid', 'The access token is not valid');
          }
          // The issuer's keys could not be fetched: nothing can be checked (fail closed, 503), and
          // the issuer is not asked again before the failure's window ends.
          failures.inc({ reason: 'keys_unavailable' });
          const retryAfter =
            err instanceof KeysUnavailable ? Math.max(1, Math.ceil((err.until - Date.now()) / 1000)) : 1;
          throw new GatewayError('unavailable', "The authorization server's keys are unavailable", {
            cause: err,
            headers: { 'Retry-After': String(retryAfter) },
          });
        }
        const granted = scopesOf(payload);
        const missing = required.filter((s) => !granted.includes(s));
        if (missing.length > 0) {
          failures.inc({ reason: 'insufficient_scope' });
          throw new GatewayError('forbidden', `The access token lacks the scope ${missing.join(' ')}`, {
            headers: { 'WWW-Authenticate': challenge('insufficient_scope') },
            details: { missing_scopes: missing },
          });
        }
        ctx.state.caller = {
          id: String(payload.sub),
          authenticated: true,
          attributes: {
            scopes: granted,
            client_id: typeof payload.client_id === 'string' ? payload.client_id : (payload.azp ?? null),
            issuer: payload.iss,
          },
        };
        try {
          await next();
        } catch (err) {
          throw withScopeChallenge(err, granted);
        }
      },
      describe: () => ({
        enabled: options.enabled !== false,
        resource: options.resource,
        issuer: options.issuer,
        scopes: required,
      }),
      inactive: options.enabled === false,
    };
  },
});

/** `scope` (space-separated, RFC 9068) or `scp` (an array, as some servers write it). */
function scopesOf(payload: JWTPayload): string[] {
  if (typeof payload.scope === 'string') return payload.scope.split(' ').filter(Boolean);
  if (Array.isArray(payload.scp)) return payload.scp.filter((s): s is string => typeof s === 'string');
  return [];
}

export default [oauthMetadataPlugin, oauthBearerPlugin];
