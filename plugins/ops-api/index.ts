/**
 * ops-api: the operations endpoints of a service (terminal stage), behind an admin token
 * (`X-Admin-Token` by default, or `Authorization: Bearer`, the scheme of every admin endpoint). Mount it on a wildcard route, e.g.
 * `match: { method: GET, path: "/admin/*rest" }`; it answers, under `base_path` (`/admin`):
 *
 *   GET /admin/status                 version, uptime, connections against the maximum, memory, CPU
 *   GET /admin/connections            the open client connections of the main listener
 *   GET /admin/stats/queries          store: queryStats()       (needs option `store`)
 *   GET /admin/stats/storage          store: storageStats()
 *   GET /admin/slow-queries?limit=N   store: slowQueries(N)     N from 1 to 1000, default 10
 *
 * The store reports are passed through as the resource gives them (see api.ts). Connection
 * figures are this process's (in cluster mode, the worker that answers).
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  respond,
} from '../../runtime/index.ts';
import type { OpsStatsSource } from './api.ts';
import { processStats } from './process-stats.ts';
import { tokenChecker } from './token.ts';

const DEFAULT_LIMIT = 10;
const MAX_LIMIT = 1000;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['token'],
  properties: {
    token: { type: 'string', description: 'Admin token; an empty one (unset variable) refuses to start' },
    token_header: {
      type: 'string',
      minLength: 1,
      default: 'X-Admin-Token',
      description: 'Header carrying the token',
    },
    store: {
      type: 'string',
      minLength: 1,
      'x-ref': 'resource',
      description: 'Resource with queryStats/storageStats/slowQueries (an entity-store); enables the stats routes',
    },
    base_path: { type: 'string', pattern: '^/', default: '/admin', description: 'Path the endpoints live under' },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'ops-api',
  description:
    'Operations endpoints behind an admin token: status, connections, store query/storage stats, slow queries',
  options: optionsSchema,
  create(options, env) {
    const header = options.token_header;
    const base = options.base_path.replace(/\/+$/, '');
    const matches = tokenChecker(options.token);
    const store = options.store ? statsSource(env.resource(options.store), options.store) : undefined;
    const service = env.service;

    const needStore = (): OpsStatsSource => {
      if (!store) {
        throw new GatewayError('not_found', 'No store is configured for this service (ops-api option store)', {
          code: 'no_store',
        });
      }
      return store;
    };

    const endpoints: Record<string, (ctx: GatewayContext) => unknown> = {
      '/status': () => {
        const c = service.connections?.();
        return {
          version: service.version,
          uptime_seconds: Math.floor((Date.now() - service.startedAt.getTime()) / 1000),
          connections: { active: c?.active ?? 0, max: c?.max ?? null },
          ...processStats(),
        };
      },
      '/connections': () => {
        const c = service.connections?.();
        return { active: c?.active ?? 0, max: c?.max ?? null, connections: c?.clients ?? [] };
      },
      '/stats/queries': () => needStore().queryStats(),
      '/stats/storage': () => needStore().storageStats(),
      '/slow-queries': (ctx) => needStore().slowQueries(limitOf(ctx)),
    };

    return {
      async handle(ctx) {
        const presented = presentedToken(ctx, header);
        if (presented === '') {
          throw new GatewayError('unauthorized', `Missing token in header ${header} (or Authorization: Bearer)`, {
            details: { header },
          });
        }
        if (!matches(presented)) throw new GatewayError('unauthorized', 'Invalid token', { details: { header } });
        const endpoint = ctx.path.startsWith(`${base}/`) ? endpoints[ctx.path.slice(base.length)] : undefined;
        if (!endpoint) throw new GatewayError('not_found', `No admin endpoint ${ctx.method} ${ctx.path}`);
        if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
          throw new GatewayError('method_not_allowed', `Method ${ctx.method} is not allowed on ${ctx.path}`, {
            headers: { Allow: 'GET' },
            details: { allowed: ['GET'] },
          });
        }
        ctx.set('Cache-Control', 'no-store');
        respond(ctx, await endpoint(ctx));
      },
      describe: () => ({ base_path: base, store: options.store ?? null, token_header: header }),
    };
  },
});

/** The resource's value as a stats source; a resource without the three reports cannot serve. */
function statsSource(value: unknown, name: string): OpsStatsSource {
  const v = value as Partial<OpsStatsSource> | undefined;
  const missing = (['queryStats', 'storageStats', 'slowQueries'] as const).filter((m) => typeof v?.[m] !== 'function');
  if (missing.length > 0) {
    throw new Error(`resource "${name}" has no ${missing.join(', ')} (ops-api store must be an entity-store)`);
  }
  return v as OpsStatsSource;
}

/** `?limit=N`: an integer from 1 (default 10); above 1000 is clamped to 1000. */
function limitOf(ctx: GatewayContext): number {
  const raw = ctx.query.limit;
  if (raw === undefined || raw === '') return DEFAULT_LIMIT;
  const value = Array.isArray(raw) ? undefined : Number(raw);
  if (value === undefined || !Number.isInteger(value) || value < 1) {
    throw new GatewayError('bad_request', 'Query parameter limit must be an integer from 1', {
      details: { parameter: 'limit', value: raw },
    });
  }
  return Math.min(value, MAX_LIMIT);
}

/** The token in the configured header, else in `Authorization: Bearer <token>`; '' when neither. */
function presentedToken(ctx: GatewayContext, header: string): string {
  const own = header.toLowerCase() === 'authorization' ? '' : ctx.get(header);
  if (own !== '') return own;
  return /^Bearer[ \t]+(\S.*)$/i.exec(ctx.get('authorization').trim())?.[1]?.trim() ?? '';
}
