/**
 * tenant-auth: maps the API key of a request to its tenant. The key comes in
 * `Authorization: Bearer <key>` (default) or raw in another header. A missing or unknown key is
 * `unauthorized` (401; the openai dialect writes `authentication_error`), never echoing the key.
 * On success the tenant becomes the caller, and its backend the upstream of the request:
 *
 *   ctx.state.caller   = { id, authenticated: true, attributes: { tenant, policy, classifiers,
 *                          requests_per_minute, tokens_per_minute, backend } }
 *   ctx.state.upstream = the tenant's backend (an upstream name), or its ordered list of backends
 *                        (providers the proxy tries in turn)
 *
 * so that `rate-limit` (key: caller, limit_from: caller.attributes.requests_per_minute),
 * `token-limit` (limit_from: caller.attributes.tokens_per_minute), the
 * policy stage and the proxy act per tenant.
 */
import { type Caller, definePlugin, type FromSchema, GatewayError, type JsonSchema } from '../../runtime/index.ts';
import type { Tenant, TenantDirectory } from './api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['tenants'],
  properties: {
    tenants: { type: 'string', minLength: 1, 'x-ref': 'resource', description: 'A tenant-directory resource' },
    header: {
      type: 'string',
      pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$",
      default: 'Authorization',
      description: '`Authorization` expects `Bearer <key>`; any other header carries the raw key',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'tenant-auth',
  description: 'Authenticate a request by API key against a tenant directory; the tenant becomes the caller',
  provides: ['caller', 'upstream'],
  options: optionsSchema,
  create(options, env) {
    const directory = env.resource<TenantDirectory>(options.tenants);
    if (typeof directory?.byKey !== 'function')
      throw new Error(`resource "${options.tenants}" is not a tenant-directory`);
    const header = options.header;
    const bearer = header.toLowerCase() === 'authorization';
    const failures = env.metrics.counter({
      name: 'switchyard_tenant_auth_failures_total',
      help: 'Requests refused by tenant authentication, by reason (missing|invalid)',
      labelNames: ['reason'] as const,
    });
    const realm = `realm="${env.service.name}"`;

    function reject(reason: 'missing' | 'invalid', message: string, requestId: string): never {
      failures.inc({ reason });
      env.logger.debug({ request_id: requestId, reason, header }, 'tenant authentication failed');
      // RFC 6750: a Bearer challenge, with `invalid_token` when a key was presented.
      const headers = bearer
        ? { 'WWW-Authenticate': reason === 'missing' ? `Bearer ${realm}` : `Bearer ${realm}, error="invalid_token"` }
        : undefined;
      throw new GatewayError('unauthorized', message, { details: { header }, headers });
    }
    const missing = bearer
      ? `Missing API key: send it as "${header}: Bearer <key>"`
      : `Missing API key in header ${header}`;

    // One caller per tenant, made on first use and shared by its requests (frozen: no stage can
    // change it for the others). A reload makes new tenant objects, so new callers.
    const callers = new WeakMap<Tenant, Caller>();
    const callerOf = (tenant: Tenant): Caller => {
      let caller = callers.get(tenant);
      if (!caller) {
        caller = Object.freeze({
          id: tenant.id,
          authenticated: true,
          attributes: Object.freeze({
            tenant: tenant.id,
            policy: tenant.policy,
            classifiers: tenant.classifiers,
            requests_per_minute: tenant.requests_per_minute,
            ...(tenant.tokens_per_minute !== undefined ? { tokens_per_minute: tenant.tokens_per_minute } : {}),
            backend: tenant.backend,
          }),
        });
        callers.set(tenant, caller);
      }
      return caller;
    };

    return {
      handle(ctx, next) {
        const raw = ctx.get(header).trim();
        if (!raw) reject('missing', missing, ctx.state.requestId);
        let key = raw;
        if (bearer) {
          const match = /^Bearer[ \t]+(\S.*)$/i.exec(raw);
          if (!match) reject('invalid', `Invalid ${header} header: expected "Bearer <key>"`, ctx.state.requestId);
          key = match[1].trim();
        }
        const tenant = directory.byKey(key);
        if (!tenant) reject('invalid', 'Invalid API key', ctx.state.requestId);
        ctx.state.caller = callerOf(tenant);
        ctx.state.upstream = tenant.backends.length > 1 ? tenant.backends : tenant.backend;
        return next();
      },
      /**
       * A dry run names the tenant instead of presenting its key (an unknown one is a 404); its
       * attributes, when it brings some, replace the tenant's (a what-if: another policy). Without
       * a tenant the caller is anonymous, with only those attributes: the stages after fall back
       * to their defaults for everything else.
       */
      dryRun(ctx, next) {
        const run = ctx.state.dryRun;
        const id = run?.identity;
        const tenant = id === undefined ? undefined : directory.get(id);
        if (id !== undefined && !tenant) {
          throw new GatewayError('not_found', `Unknown tenant "${id}"`, { details: { tenant: id } });
        }
        const caller = tenant ? callerOf(tenant) : { id: 'dry-run', authenticated: false, attributes: {} };
        ctx.state.caller = run?.attributes
          ? { ...caller, attributes: { ...caller.attributes, ...run.attributes } }
          : caller;
        if (tenant) ctx.state.upstream = tenant.backends.length > 1 ? tenant.backends : tenant.backend;
        return next();
      },
      describe: () => ({ tenants: options.tenants, header, tenants_loaded: directory.list().length }),
    };
  },
});
