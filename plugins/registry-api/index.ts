/**
 * registry-api: the SType registry over REST, one operation per route (terminal stage).
 *
 *   GET  /api/stypes                 op: list      ?page (≥1, default 1) &limit (default 20) &status
 *   GET  /api/stypes/:stype          op: detail
 *   GET  /api/stypes/:stype/schema   op: schema    (application/schema+json)
 *   POST /api/validate               op: validate  {stype, payload}
 *   GET  /api/profiles               op: profiles
 *   GET  /api/search?q=              op: search
 *
 * A `limit` above 100 is clamped to 100 (the effective value is echoed in `pagination.limit`),
 * as GitHub's and most paginated APIs do: a client asking for "as many as possible" gets a full
 * page rather than an error. Non-integer or < 1 values and an unknown `status` are 400.
 *
 * validate answers 200 for valid and invalid payloads alike (the registry API's contract); the
 * typed proxy's POST /validate sets `invalid_status: 422`. The body is the validation result
 * in both cases.
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  readJsonObject,
  respond,
} from '../../runtime/index.ts';
import type { STypeRecord, STypeRegistry } from '../stype-registry/api.ts';
import { registryOption } from '../stype-registry/api.ts';

type Op = 'list' | 'detail' | 'schema' | 'validate' | 'profiles' | 'search';

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;
const STATUSES = ['approved', 'pending', 'all'] as const;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['registry', 'op'],
  properties: {
    registry: registryOption,
    op: {
      enum: ['list', 'detail', 'schema', 'validate', 'profiles', 'search'],
      description: 'Operation of this route.',
    },
    invalid_status: {
      type: 'integer',
      minimum: 200,
      maximum: 599,
      default: 200,
      description: 'validate: HTTP status of the result when the payload is invalid (200 registry API, 422 proxy).',
    },
  },
} as const satisfies JsonSchema;

type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'registry-api',
  description: 'Serve the SType registry over REST: list, detail, schema, validate, profiles, search.',
  options: optionsSchema,
  create(options, env) {
    const registry = env.resource<STypeRegistry>(options.registry);
    const invalidStatus = options.invalid_status;
    const handlers: Record<Op, (ctx: GatewayContext) => Promise<void> | void> = {
      list: (ctx) => list(ctx, registry),
      detail: (ctx) => {
        const r = find(ctx, registry);
        respond(ctx, detail(r, `${ctx.path.replace(/\/+$/, '')}/schema`));
      },
      schema: (ctx) => {
        respond(ctx, find(ctx, registry).schema, { type: 'application/schema+json' });
      },
      validate: (ctx) => validate(ctx, registry, invalidStatus),
      profiles: (ctx) => {
        respond(ctx, { profiles: registry.profiles() });
      },
      search: (ctx) => {
        const q = single(ctx, 'q');
        if (q === undefined || q.trim() === '') {
          throw new GatewayError('bad_request', 'Query parameter q is required and must not be empty', {
            details: { parameter: 'q' },
          });
        }
        respond(ctx, registry.search(q.trim()));
      },
    };
    const handle = handlers[options.op];
    return {
      handle: async (ctx) => {
        await handle(ctx);
      },
      describe: () => ({ op: options.op, registry: options.registry }),
    };
  },
});

function summary(r: STypeRecord) {
  return {
    stype: r.id,
    status: r.status,
    version: r.version,
    description: r.description,
    samples: r.samples,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

function detail(r: STypeRecord, schemaUrl: string) {
  return {
    ...summary(r),
    namespace: r.namespace,
    hash: r.hash,
    schema_url: schemaUrl,
    qom_profiles: r.qom_profiles,
    policies: r.policies,
  };
}

/** A query parameter given at most once (a repeated one is ambiguous: 400). */
function single(ctx: GatewayContext, name: string): string | undefined {
  const v = ctx.query[name];
  if (Array.isArray(v)) {
    throw new GatewayError('bad_request', `Query parameter ${name} must be given once`, {
      details: { parameter: name },
    });
  }
  return v;
}

function positiveInt(ctx: GatewayContext, name: string, fallback: number): number {
  const raw = single(ctx, name);
  if (raw === undefined || raw === '') return fallback;
  const n = /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new GatewayError('bad_request', `Query parameter ${name} must be an integer of at least 1`, {
      details: { parameter: name, value: raw },
    });
  }
  return n;
}

function list(ctx: GatewayContext, registry: STypeRegistry): void {
  const page = positiveInt(ctx, 'page', 1);
  const limit = Math.min(positiveInt(ctx, 'limit', DEFAULT_LIMIT), MAX_LIMIT);
  const status = single(ctx, 'status') || 'all';
  if (!(STATUSES as readonly string[]).includes(status)) {
    throw new GatewayError('bad_request', `Query parameter status must be one of ${STATUSES.join(', ')}`, {
      details: { parameter: 'status', value: status, allowed: [...STATUSES] },
    });
  }
  const all = registry.list();
  const selected = status === 'all' ? all : all.filter((r) => r.status === status);
  const start = (page - 1) * limit;
  respond(ctx, {
    data: selected.slice(start, start + limit).map(summary),
    pagination: { page, limit, total: selected.length, total_pages: Math.ceil(selected.length / limit) },
  });
}

function find(ctx: GatewayContext, registry: STypeRegistry): STypeRecord {
  const id = (ctx.params as Record<string, string> | undefined)?.stype ?? '';
  const r = registry.get(id);
  if (!r) throw new GatewayError('not_found', `SType "${id}" not found`, { details: { stype: id } });
  return r;
}

async function validate(ctx: GatewayContext, registry: STypeRegistry, invalidStatus: number): Promise<void> {
  const body = await readJsonObject(ctx);
  const missing = (['stype', 'payload'] as const).filter((f) => body[f] === undefined);
  if (missing.length > 0) {
    throw new GatewayError(
      'bad_request',
      `Missing required field${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`,
      {
        details: { field: missing[0], fields: missing },
      },
    );
  }
  const { stype, payload } = body;
  if (typeof stype !== 'string' || stype === '') {
    throw new GatewayError('bad_request', 'Field stype must be a non-empty string', { details: { field: 'stype' } });
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw new GatewayError('bad_request', 'Field payload must be a JSON object', { details: { field: 'payload' } });
  }
  const record = registry.get(stype);
  const result = record && registry.validate(stype, payload);
  if (!record || !result) {
    throw new GatewayError('not_found', `SType "${stype}" is not in the registry`, {
      code: 'stype_not_found',
      details: { stype },
      extra: { available_stypes: registry.list().map((r) => r.id) },
    });
  }
  respond(
    ctx,
    result.valid
      ? { valid: true, stype, schema_version: record.version, hash: record.hash }
      : { valid: false, stype, schema_version: record.version, errors: result.violations },
    { status: result.valid ? 200 : invalidStatus },
  );
}
