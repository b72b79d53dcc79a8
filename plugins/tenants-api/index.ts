/**
 * tenants-api: the tenants of a tenant directory over HTTP, one operation per route (terminal stage).
 *
 *   GET /admin/tenants        op: list   {tenants: [{id, backend (URL), policy}]}
 *   GET /admin/tenant-info    op: info   header X-Tenant-ID →
 *       {tenant, backend, policy, rate_limit: {requests_per_minute, remaining, reset_at}, classifiers}
 *       and, for a tenant with tokens_per_minute, token_limit: {tokens_per_minute, remaining, reset_at}
 *
 * `remaining` and `reset_at` come from the `rate-limiter` resource named by `limiter` (the one the
 * tenants' rate-limit stage counts with, keyed by caller), read without counting. Without a
 * limiter nothing is counted, so a full minute is reported: remaining = requests_per_minute.
 * The token budget is read the same way from the limiter's token store (the token-limit stage's,
 * with `limiter:` and key: caller).
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  respond,
} from '../../runtime/index.ts';
import { callerKey, type Limiter } from '../rate-limit/api.ts';
import type { Tenant, TenantDirectory } from '../tenants/api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['tenants', 'op'],
  properties: {
    tenants: { type: 'string', minLength: 1, 'x-ref': 'resource', description: 'A tenant-directory resource' },
    op: { enum: ['list', 'info'], description: '`list` all tenants, or `info` on the one named by `header`' },
    limiter: {
      type: 'string',
      minLength: 1,
      'x-ref': 'resource',
      description: 'info: the rate-limiter resource the tenants are counted with (key: caller)',
    },
    header: {
      type: 'string',
      pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$",
      default: 'X-Tenant-ID',
      description: 'info: request header naming the tenant',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'tenants-api',
  description: 'Serve a tenant directory: list tenants, or one tenant with its rate-limit state (terminal stage)',
  options: optionsSchema,
  create(options, env) {
    const directory = env.resource<TenantDirectory>(options.tenants);
    if (typeof directory?.get !== 'function')
      throw new Error(`resource "${options.tenants}" is not a tenant-directory`);
    const limiter = options.limiter ? env.resource<Limiter>(options.limiter) : undefined;
    if (limiter && typeof limiter.peek !== 'function')
      throw new Error(`resource "${options.limiter}" is not a rate-limiter`);
    if (limiter && limiter.windowSeconds !== 60) {
      env.logger.warn(
        { limiter: options.limiter, window_seconds: limiter.windowSeconds },
        'tenant-info reports requests_per_minute, but this limiter counts over another window',
      );
    }
    const header = options.header;

    const list = (ctx: GatewayContext) => {
      respond(ctx, { tenants: directory.list().map((t) => ({ id: t.id, backend: t.backendUrl, policy: t.policy })) });
    };

    const info = async (ctx: GatewayContext) => {
      const id = ctx.get(header).trim();
      if (!id) throw new GatewayError('bad_request', `Missing header ${header}`, { details: { header } });
      const tenant = directory.get(id);
      if (!tenant) {
        const shown = id.length <= 128 ? id : undefined;
        throw new GatewayError('not_found', shown ? `Unknown tenant "${shown}"` : 'Unknown tenant', {
          details: shown ? { tenant: shown } : {},
        });
      }
      respond(ctx, {
        tenant: tenant.id,
        backend: tenant.backendUrl,
        policy: tenant.policy,
        rate_limit: await rateLimit(tenant, limiter),
        classifiers: [...tenant.classifiers],
        ...(tenant.tokens_per_minute !== undefined ? { token_limit: await tokenLimit(tenant, limiter) } : {}),
      });
    };

    return {
      handle: async (ctx) => (options.op === 'list' ? list(ctx) : info(ctx)),
      describe: () => ({ op: options.op, tenants: options.tenants, limiter: options.limiter ?? null }),
    };
  },
});

async function rateLimit(tenant: Tenant, limiter: Limiter | undefined) {
  const limit = tenant.requests_per_minute;
  if (!limiter) {
    return { requests_per_minute: limit, remaining: limit, reset_at: new Date(Date.now() + 60_000).toISOString() };
  }
  const state = await limiter.peek(callerKey(tenant.id), limit);
  return {
    requests_per_minute: limit,
    remaining: state.remaining,
    reset_at: new Date(state.resetAt * 1000).toISOString(),
  };
}

async function tokenLimit(tenant: Tenant, limiter: Limiter | undefined) {
  const limit = tenant.tokens_per_minute as number;
  if (!limiter) {
    return { tokens_per_minute: limit, remaining: limit, reset_at: new Date(Date.now() + 60_000).toISOString() };
  }
  const state = await limiter.tokens.peek(callerKey(tenant.id), limit);
  return {
    tokens_per_minute: limit,
    remaining: state.remaining,
    reset_at: new Date(state.resetAt * 1000).toISOString(),
  };
}
