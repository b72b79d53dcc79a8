/**
 * audit-api: the audit trail over REST (terminal stage), one operation per route.
 *
 *   GET /audit          op: list    ?start &end &limit (default 100) &offset &tenant &action
 *   GET /audit/verify   op: verify  ?start &end
 *
 * `start` / `end` are ISO 8601 dates or date-times (see time.ts); start ≤ timestamp ≤ end, and a
 * date-only end covers its whole day. Records come oldest first (chain order), so pages stay
 * stable while new records are appended. A `limit` above 1000 is clamped to 1000 and the
 * effective value echoed, as the registry API does; anything not a valid value is 400 naming the
 * parameter. With a range, verify starts at the first record in it and trusts that record's link
 * to its predecessor (see docs/audit.md).
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  respond,
} from '../../runtime/index.ts';
import { type AuditChain, chainOption, type VerifyRange } from '../audit-chain/api.ts';
import { exclusiveEnd, parseInstant } from './time.ts';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const ACTIONS = ['allow', 'block', 'redact', 'flag'] as const;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['op'],
  properties: {
    chain: chainOption,
    op: { enum: ['list', 'verify'], description: 'Operation of this route' },
  },
} as const satisfies JsonSchema;

type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'audit-api',
  description: 'Serve an audit-chain over REST: list records (GET /audit) and verify the chain (GET /audit/verify)',
  options: optionsSchema,
  create(options, env) {
    const name = options.chain;
    const chain = env.resource<AuditChain>(name);
    const handle =
      options.op === 'list'
        ? async (ctx: GatewayContext) => {
            const limit = Math.min(integer(ctx, 'limit', DEFAULT_LIMIT, 1), MAX_LIMIT);
            const offset = integer(ctx, 'offset', 0, 0);
            const action = single(ctx, 'action');
            if (action !== undefined && !(ACTIONS as readonly string[]).includes(action)) {
              throw badParameter('action', action, `must be one of ${ACTIONS.join(', ')}`, { allowed: [...ACTIONS] });
            }
            const page = await chain.query({ ...range(ctx), limit, offset, tenant: single(ctx, 'tenant'), action });
            respond(ctx, { records: page.records, total: page.total, offset, limit });
          }
        : async (ctx: GatewayContext) => {
            respond(ctx, await chain.verify(range(ctx)));
          };
    return { handle, describe: () => ({ op: options.op, chain: name }) };
  },
});

function badParameter(name: string, value: string, must: string, extra: Record<string, unknown> = {}): GatewayError {
  return new GatewayError('bad_request', `Query parameter ${name} ${must}`, {
    details: { parameter: name, value, ...extra },
  });
}

/** A query parameter given at most once (a repeated one is ambiguous: 400); "" counts as absent. */
function single(ctx: GatewayContext, name: string): string | undefined {
  const v = ctx.query[name];
  if (Array.isArray(v)) {
    throw new GatewayError('bad_request', `Query parameter ${name} must be given once`, {
      details: { parameter: name },
    });
  }
  return v === '' ? undefined : v;
}

function integer(ctx: GatewayContext, name: string, fallback: number, min: number): number {
  const raw = single(ctx, name);
  if (raw === undefined) return fallback;
  const n = /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) throw badParameter(name, raw, `must be an integer of at least ${min}`);
  return n;
}

/** `start` / `end` as the chain's half-open range of ISO timestamps. */
function range(ctx: GatewayContext): VerifyRange {
  const instant = (name: string) => {
    const raw = single(ctx, name);
    if (raw === undefined) return undefined;
    const parsed = parseInstant(raw);
    if (!parsed) throw badParameter(name, raw, 'must be an ISO 8601 date or date-time (e.g. 2024-05-01T10:00:00Z)');
    return parsed;
  };
  const start = instant('start');
  const end = instant('end');
  if (start && end && exclusiveEnd(end) <= start.ms) {
    throw badParameter('end', single(ctx, 'end') as string, 'must not be before start');
  }
  // Timestamps compare as text, which holds for 4-digit years only: past 9999, start matches
  // nothing and end bounds nothing.
  const text = (ms: number) => (ms < YEAR_10000 ? new Date(ms).toISOString() : undefined);
  return {
    start: start && (text(start.ms) ?? LAST_INSTANT),
    end: end && text(exclusiveEnd(end)),
  };
}

const YEAR_10000 = Date.UTC(10000, 0, 1);
const LAST_INSTANT = '9999-12-31T23:59:59.999Z';
