/**
 * elo-leaderboard: every entity, highest rating first (ties: lowest id first).
 *
 *   GET /leaderboard/                                  Elo ratings as stored
 *   GET /leaderboard/?method=bradley-terry             Bradley–Terry maximum likelihood over all outcomes
 *   GET /leaderboard/?method=bradley-terry&bootstrap=200&seed=7   … with 95% bootstrap intervals
 *
 * `skip` and `limit` page the answer (default: everything). Elo pages are read from the store
 * by keyset on (rating desc, id asc), so a deep page costs what the first one does. A
 * Bradley–Terry board is computed from every stored outcome and kept until the store changes
 * (its change log head), so repeated reads cost one cheap query. The fit itself runs in a worker
 * thread (fit-runner.ts), bounded in number, time and memory, and stopped when its client goes
 * away: a bootstrap takes seconds, and a new `seed` defeats the cache.
 */
import type { ServerResponse } from 'node:http';
import {
  definePlugin,
  type Entity,
  type Filter,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  respond,
} from '../../runtime/index.ts';
import { describeStage, jsonResponse, ref, validationResponse, validationSchemas } from '../openapi/api.ts';
import {
  choiceParam,
  integerParam,
  type RecordType,
  scanAll,
  type ValidationIssue,
  validationError,
} from '../records/api.ts';
import { FitRunner } from './fit-runner.ts';

/** Entities × bootstrap samples at most (8 bytes each: 128 MiB). */
const maxBootstrapCells = 16 * 1024 * 1024;

const FIELD = '^[a-z][a-z0-9_]{0,63}$';
const METHODS = ['elo', 'bradley-terry'] as const;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items'],
  properties: {
    items: { type: 'string', 'x-ref': 'resource', description: 'record-type of the rated entities.' },
    outcomes: {
      type: 'string',
      'x-ref': 'resource',
      description: 'record-type of the outcomes (needed for bradley-terry).',
    },
    rating_field: { type: 'string', pattern: FIELD, default: 'rating' },
    fields: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        first: { type: 'string', pattern: FIELD, default: 'entity1_id' },
        second: { type: 'string', pattern: FIELD, default: 'entity2_id' },
        winner: { type: 'string', pattern: FIELD, default: 'selected_entity_id' },
      },
    },
    max_limit: { type: 'integer', minimum: 1, default: 1000000, description: 'Largest `limit` accepted.' },
    bradley_terry: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        prior: {
          type: 'number',
          minimum: 0,
          default: 1,
          description: 'Virtual wins and losses per entity against an average reference (0: plain MLE).',
        },
        max_bootstrap: {
          type: 'integer',
          minimum: 0,
          maximum: 10000,
          default: 1000,
          description: 'Largest `bootstrap` accepted.',
        },
        level: {
          type: 'number',
          exclusiveMinimum: 0,
          exclusiveMaximum: 1,
          default: 0.95,
          description: 'Coverage of the intervals.',
        },
        max_iterations: { type: 'integer', minimum: 1, default: 1000 },
        seed: { type: 'integer', default: 1, description: 'Default bootstrap seed.' },
        max_concurrent: {
          type: 'integer',
          minimum: 1,
          default: 1,
          description: 'Fits running at once (each in its own worker thread); more is 503 with Retry-After.',
        },
        timeout_ms: {
          type: 'integer',
          minimum: 1,
          default: 15000,
          description: 'Time limit of one fit, bootstrap included; beyond it the fit is stopped: 504.',
        },
        memory_mb: {
          type: 'integer',
          minimum: 16,
          default: 512,
          description: 'Heap limit of a fit worker (MiB); a fit that needs more is 503.',
        },
        nice: {
          type: 'integer',
          minimum: 0,
          maximum: 19,
          default: 0,
          description:
            "CPU niceness of a fit worker's thread (Linux; 0: the process's own). Raised, the event loop wins the cores from fits, but on a busy machine a fit starves (19: 10-20x slower) and ends at `timeout_ms` with 504.",
        },
      },
    },
  },
} as const satisfies JsonSchema;
type LeaderboardOptions = FromSchema<typeof optionsSchema>;

export const eloLeaderboard = definePlugin<LeaderboardOptions>({
  name: 'elo-leaderboard',
  description: 'Leaderboard of a record-type by stored Elo rating, or by Bradley–Terry MLE with bootstrap intervals.',
  options: optionsSchema,
  create(options, env) {
    const items = env.resource<RecordType>(options.items);
    const outcomes = options.outcomes ? env.resource<RecordType>(options.outcomes) : undefined;
    const rating = options.rating_field;
    const f = options.fields;
    const bt = options.bradley_terry;
    const fits = new FitRunner({
      maxConcurrent: bt.max_concurrent,
      timeoutMs: bt.timeout_ms,
      memoryMb: bt.memory_mb,
      nice: bt.nice,
    });
    const maxLimit = options.max_limit;
    /** The last Bradley–Terry board, valid while the change log head stays at `seq`. */
    let cached: { key: string; seq: number; rows: Array<Record<string, unknown>> } | undefined;

    const eloRows = async (skip: number, limit: number | undefined, requestId: string) => {
      const store = items.store();
      const order = [
        { field: rating, direction: 'desc' as const },
        { field: 'id', direction: 'asc' as const },
      ];
      const page = store.limits.maxEntities;
      const rows: Array<Record<string, unknown>> = [];
      // The first page by offset, the rest by keyset after the last row seen.
      let after: Entity | undefined;
      let offset = skip;
      for (;;) {
        const want = limit === undefined ? page : Math.min(page, limit - rows.length);
        if (want <= 0) return rows;
        const filter: Filter | undefined = after
          ? {
              any: [
                { field: rating, op: 'lt', value: after.data[rating] as number },
                {
                  all: [
                    { field: rating, op: 'eq', value: after.data[rating] as number },
                    { field: 'id', op: 'gt', value: after.id },
                  ],
                },
              ],
            }
          : undefined;
        const { items: got } = await store.query(items.entityType, { filter, order, offset, limit: want, requestId });
        rows.push(...got.map((e) => items.project(e)));
        if (got.length < want) return rows;
        after = got.at(-1);
        offset = 0;
      }
    };

    const btRows = async (bootstrap: number, seed: number, requestId: string, res: ServerResponse) => {
      if (!outcomes) throw new GatewayError('bad_request', 'method bradley-terry is not configured (no outcomes)');
      const store = items.store();
      const key = `${bootstrap}:${seed}`;
      const seq = await store.lastSeq();
      if (cached && cached.key === key && cached.seq === seq) return cached.rows;
      const entities = await scanAll(store, items.entityType, undefined, requestId);
      const index = new Map(entities.map((e, i) => [e.id, i]));
      const games = await scanAll(store, outcomes.entityType, undefined, requestId);
      const winners: number[] = [];
      const losers: number[] = [];
      const played = new Float64Array(entities.length);
      for (const g of games) {
        const a = index.get(g.data[f.first] as number);
        const b = index.get(g.data[f.second] as number);
        const w = g.data[f.winner];
        if (a === undefined || b === undefined) continue; // an entity was deleted since
        const aWon = w === g.data[f.first];
        winners.push(aWon ? a : b);
        losers.push(aWon ? b : a);
        played[a]!++;
        played[b]!++;
      }
      // The bootstrap keeps every entity's rating of every resample: bound that table.
      if (bootstrap * entities.length > maxBootstrapCells) {
        throw validationError([
          {
            type: 'less_than_equal',
            loc: ['query', 'bootstrap'],
            msg: `Input should be less than or equal to ${Math.floor(maxBootstrapCells / entities.length)} with ${entities.length} entities`,
            input: String(bootstrap),
            ctx: { le: Math.floor(maxBootstrapCells / entities.length) },
          },
        ]);
      }
      const fit = await fits.run(
        {
          n: entities.length,
          winners: Int32Array.from(winners),
          losers: Int32Array.from(losers),
          options: {
            prior: bt.prior,
            maxIterations: bt.max_iterations,
            base: Number(items.fields[rating]?.default ?? 1500),
          },
          bootstrap: { samples: bootstrap, seed, level: bt.level },
        },
        res,
      );
      const rows = entities.map((e, i) => ({
        ...items.project(e),
        id: e.id,
        bt_rating: fit.ratings[i]!,
        ...(fit.lower ? { bt_ci_lower: fit.lower[i]!, bt_ci_upper: fit.upper![i]! } : {}),
        games: played[i]!,
      }));
      rows.sort((x, y) => y.bt_rating - x.bt_rating || (x.id as number) - (y.id as number));
      cached = { key, seq, rows };
      return rows;
    };

    const handle = async (ctx: GatewayContext) => {
      const issues: ValidationIssue[] = [];
      const q = ctx.query;
      const method = choiceParam(q.method, ['query', 'method'], METHODS, 'elo', issues);
      const skip = integerParam(q.skip, ['query', 'skip'], { default: 0, minimum: 0 }, issues) ?? 0;
      const limit = integerParam(q.limit, ['query', 'limit'], { minimum: 1, maximum: maxLimit }, issues);
      const bootstrap =
        integerParam(
          q.bootstrap,
          ['query', 'bootstrap'],
          { default: 0, minimum: 0, maximum: bt.max_bootstrap },
          issues,
        ) ?? 0;
      const seed =
        integerParam(q.seed, ['query', 'seed'], { default: bt.seed, minimum: 0, maximum: 2 ** 32 - 1 }, issues) ??
        bt.seed;
      if (issues.length > 0) throw validationError(issues);
      const requestId = ctx.state.requestId;
      if (method === 'elo') {
        respond(ctx, await eloRows(skip, limit, requestId));
        return;
      }
      const rows = await btRows(bootstrap, seed, requestId, ctx.res);
      respond(ctx, rows.slice(skip, limit === undefined ? undefined : skip + limit));
    };
    return { handle, close: () => fits.close() };
  },
});

describeStage('elo-leaderboard', (raw, ctx) => {
  const o = raw as LeaderboardOptions;
  const items = ctx.resource<RecordType>(o.items);
  const name = items.title.replace(/[^A-Za-z0-9]/g, '');
  const maxBootstrap = o.bradley_terry?.max_bootstrap;
  return {
    schemas: { ...validationSchemas, [name]: items.schemas().record },
    operation: {
      tags: ['leaderboard'],
      summary: 'Leaderboard',
      description:
        'Every entity, highest rating first. `method=elo` (default): the stored Elo ratings. ' +
        '`method=bradley-terry`: Bradley–Terry maximum-likelihood ratings over all comparisons (MM algorithm, Elo scale), ' +
        'adding `bt_rating`, `games` and, with `bootstrap=N`, the percentile interval `bt_ci_lower`..`bt_ci_upper` ' +
        'from N resamples of the comparisons (seeded: the same `seed` gives the same interval).',
      parameters: [
        { name: 'method', in: 'query', schema: { enum: [...METHODS], default: 'elo' } },
        { name: 'bootstrap', in: 'query', schema: { type: 'integer', minimum: 0, maximum: maxBootstrap, default: 0 } },
        { name: 'seed', in: 'query', schema: { type: 'integer', minimum: 0, default: o.bradley_terry?.seed } },
        { name: 'skip', in: 'query', schema: { type: 'integer', minimum: 0, default: 0 } },
        {
          name: 'limit',
          in: 'query',
          schema: { type: ['integer', 'null'], minimum: 1 },
          description: 'Default: every entity.',
        },
      ],
      responses: {
        200: jsonResponse('Entities, highest first', { type: 'array', items: ref(name) }),
        422: validationResponse,
      },
    },
  };
});
