/**
 * Recording a pairwise outcome (which of two entities won), as one transaction:
 *
 *   `elo-outcome`    both Elo ratings move (K-factor), both comparison counters and the pair's
 *                    bandit state are updated, and the outcome is stored as a record (the answer)
 *   `bandit-outcome` the bandit state only (counters and pair state): a manual update
 *
 * The transaction reads both entities and writes them back checked against the versions read
 * (optimistic concurrency); a conflict reruns the whole function on fresh reads (`retries`).
 * The store serialises writing transactions, so outcomes get increasing ids in commit order and
 * replaying them in id order gives exactly the stored ratings.
 *
 * Statuses: the same entity twice, or a winner that is neither of the two, is 422 (the body is
 * invalid whatever is stored); an id that is not stored is 404.
 */
import {
  definePlugin,
  type EntityOperations,
  type FromSchema,
  type JsonSchema,
  type PluginEnv,
  readJson,
  respond,
  type Stage,
} from '../../runtime/index.ts';
import {
  describeStage,
  errorResponse,
  jsonResponse,
  ref,
  validationResponse,
  validationSchemas,
} from '../openapi/api.ts';
import { type FieldSpecs, issue, type RecordType, validateBody, validationError, writeQueue } from '../records/api.ts';
import { type PairState, pairKey } from './api.ts';
import { eloUpdate } from './elo.ts';

const FIELD = '^[a-z][a-z0-9_]{0,63}$';

const fieldsOption = {
  type: 'object',
  additionalProperties: false,
  default: {},
  description: 'Body fields naming the two entities and the winner.',
  properties: {
    first: { type: 'string', pattern: FIELD, default: 'entity1_id' },
    second: { type: 'string', pattern: FIELD, default: 'entity2_id' },
    winner: { type: 'string', pattern: FIELD, default: 'selected_entity_id' },
  },
} as const;

const common = {
  items: { type: 'string', 'x-ref': 'resource', description: 'record-type of the rated entities.' },
  pairs: { type: 'string', 'x-ref': 'resource', description: 'record-type keeping the bandit state of each pair.' },
  count_field: {
    type: 'string',
    pattern: FIELD,
    description: 'Entity field counting its comparisons (the bandit state per entity; declare it hidden, read-only).',
  },
  fields: fieldsOption,
  retries: {
    type: 'integer',
    minimum: 0,
    default: 100,
    description: 'Reruns of the transaction after a version conflict.',
  },
} as const;

const eloSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items', 'outcomes'],
  properties: {
    ...common,
    outcomes: {
      type: 'string',
      'x-ref': 'resource',
      description: 'record-type the outcomes are stored as (the answer).',
    },
    k_factor: {
      type: 'number',
      exclusiveMinimum: 0,
      default: 32,
      description: 'Elo K-factor: the largest rating change of one game.',
    },
    scale: { type: 'number', exclusiveMinimum: 0, default: 400, description: 'Rating points for 10:1 odds.' },
    rating_field: { type: 'string', pattern: FIELD, default: 'rating' },
  },
} as const satisfies JsonSchema;

const banditSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items', 'pairs'],
  properties: common,
} as const satisfies JsonSchema;

type EloOutcomeOptions = FromSchema<typeof eloSchema>;
type BanditOutcomeOptions = FromSchema<typeof banditSchema>;
/** What both outcome stages take (`pairs` is optional for elo-outcome). */
type CommonOptions = FromSchema<{ type: 'object'; required: ['items']; properties: typeof common }>;
type OutcomeFields = CommonOptions['fields'];

/** The fields of an outcome body (the schema's defaults are applied to the options before use). */
function fieldsOf(o: Pick<CommonOptions, 'fields'>): OutcomeFields {
  return o.fields;
}

/** Checks the three ids: types (strict integers), distinct entities, winner one of them. */
function readOutcome(body: unknown, f: OutcomeFields, outcomes: RecordType | undefined) {
  let data: Record<string, unknown>;
  if (outcomes) {
    data = outcomes.parse(body, 'create');
  } else {
    const spec: FieldSpecs = {
      [f.first]: { type: 'integer', required: true },
      [f.second]: { type: 'integer', required: true },
      [f.winner]: { type: 'integer', required: true },
    };
    const { value, issues } = validateBody(spec, body, 'create');
    if (issues.length > 0) throw validationError(issues);
    data = value;
  }
  const a = data[f.first] as number;
  const b = data[f.second] as number;
  const w = data[f.winner] as number;
  if (a === b) {
    throw validationError([
      issue('value_error', ['body', f.second], `Value error, ${f.second} must differ from ${f.first}`, b),
    ]);
  }
  if (w !== a && w !== b) {
    throw validationError([
      issue('value_error', ['body', f.winner], `Value error, ${f.winner} must equal ${f.first} or ${f.second}`, w),
    ]);
  }
  return { data, a, b, w };
}

/** Adds one outcome to the pair's bandit state (created on the pair's first outcome). */
export async function recordPair(
  tx: EntityOperations,
  pairs: RecordType,
  a: number,
  b: number,
  winner: number,
  requestId?: string,
) {
  const key = pairKey(a, b);
  const current = await tx.getByKey<PairState>(pairs.entityType, key);
  const lo = Math.min(a, b);
  const s: PairState = current?.data ?? {
    entity1_id: lo,
    entity2_id: Math.max(a, b),
    comparisons: 0,
    entity1_wins: 0,
    entity2_wins: 0,
  };
  const next: PairState = {
    ...s,
    comparisons: s.comparisons + 1,
    entity1_wins: s.entity1_wins + (winner === lo ? 1 : 0),
    entity2_wins: s.entity2_wins + (winner === lo ? 0 : 1),
  };
  return tx.upsertByKey(pairs.entityType, key, next, { ifVersion: current?.version, requestId });
}

/** The rating update of elo-outcome (bandit-outcome has none). */
interface EloSettings {
  outcomes: string;
  rating_field: string;
  k_factor: number;
  scale: number;
}

function outcomeStage(options: CommonOptions, env: PluginEnv, elo?: EloSettings): Stage {
  const kind = elo ? 'elo' : 'bandit';
  const items = env.resource<RecordType>(options.items);
  const outcomes = elo ? env.resource<RecordType>(elo.outcomes) : undefined;
  const pairs = options.pairs ? env.resource<RecordType>(options.pairs) : undefined;
  if (kind === 'bandit' && !pairs) throw new Error('bandit-outcome needs `pairs`');
  const f = fieldsOf(options);
  // not the schema default: the rating field's own default in the record-type, else Elo's usual start
  const initial = elo ? Number(items.fields[elo.rating_field]?.default ?? 1500) : 0;
  const countField = options.count_field;
  const recorded = env.metrics.counter({
    name: 'switchyard_elo_outcomes_total',
    help: 'Pairwise outcomes recorded, by kind (elo: comparison with rating update; bandit: bandit state only)',
    labelNames: ['kind'] as const,
  });

  return async (ctx) => {
    const requestId = ctx.state.requestId;
    const { data, a, b, w } = readOutcome(await readJson(ctx), f, outcomes);
    const store = items.store();
    const answer = await writeQueue(store)(() =>
      store.transaction(
        async (tx) => {
          const found = await tx.getMany(items.entityType, [a, b]);
          const ea = found.find((e) => e.id === a);
          const eb = found.find((e) => e.id === b);
          if (!ea) throw items.notFound(a);
          if (!eb) throw items.notFound(b);
          const da = { ...ea.data };
          const db = { ...eb.data };
          if (elo) {
            const ratingField = elo.rating_field;
            const ra = typeof da[ratingField] === 'number' ? (da[ratingField] as number) : initial;
            const rb = typeof db[ratingField] === 'number' ? (db[ratingField] as number) : initial;
            [da[ratingField], db[ratingField]] = eloUpdate(ra, rb, w === a ? 1 : 0, elo.k_factor, elo.scale);
          }
          if (countField) {
            da[countField] = (typeof da[countField] === 'number' ? (da[countField] as number) : 0) + 1;
            db[countField] = (typeof db[countField] === 'number' ? (db[countField] as number) : 0) + 1;
          }
          if (elo || countField) {
            await tx.update(items.entityType, a, da, { ifVersion: ea.version, requestId });
            await tx.update(items.entityType, b, db, { ifVersion: eb.version, requestId });
          }
          const pair = pairs ? await recordPair(tx, pairs, a, b, w, requestId) : undefined;
          // Stored last: the id is taken once both entities are locked by this transaction.
          if (kind === 'elo' && outcomes)
            return outcomes.project(await tx.create(outcomes.entityType, data, { requestId }));
          return pair ? pairs!.project(pair) : { [f.first]: a, [f.second]: b, [f.winner]: w };
        },
        { retries: options.retries },
      ),
    );
    recorded.inc({ kind });
    respond(ctx, answer);
  };
}

export const eloOutcome = definePlugin<EloOutcomeOptions>({
  name: 'elo-outcome',
  description:
    'Record a pairwise outcome: Elo update of both entities, bandit state, and the outcome record, in one transaction.',
  options: eloSchema,
  create: (options, env) => outcomeStage(options, env, options),
});

export const banditOutcome = definePlugin<BanditOutcomeOptions>({
  name: 'bandit-outcome',
  description:
    'Record a pairwise outcome in the bandit state only (pair state and comparison counters): a manual update.',
  options: banditSchema,
  create: (options, env) => outcomeStage(options, env),
});

const outcomeBody = (f: OutcomeFields) => ({
  type: 'object',
  additionalProperties: false,
  required: [f.first, f.second, f.winner],
  properties: {
    [f.first]: { type: 'integer' },
    [f.second]: { type: 'integer' },
    [f.winner]: { type: 'integer', description: `The winner: equal to ${f.first} or ${f.second}.` },
  },
});

describeStage('elo-outcome', (raw, ctx) => {
  const o = raw as EloOutcomeOptions;
  const outcomes = ctx.resource<RecordType>(o.outcomes);
  const name = outcomes.title.replace(/[^A-Za-z0-9]/g, '');
  const f = fieldsOf(o);
  return {
    schemas: { ...validationSchemas, [name]: outcomes.schemas().record, [`${name}Create`]: outcomes.schemas().create },
    operation: {
      tags: [outcomes.pluralTitle.replace(/[^A-Za-z0-9]/g, '').toLowerCase()],
      summary: `Create ${name}`,
      description:
        `Records the outcome, updates both Elo ratings (K = ${o.k_factor}) and the bandit state, in one transaction. ` +
        `422 when ${f.first} equals ${f.second} or ${f.winner} is neither; 404 when an entity does not exist.`,
      requestBody: { required: true, content: { 'application/json': { schema: ref(`${name}Create`) } } },
      responses: {
        200: jsonResponse(`The stored ${name.toLowerCase()}`, ref(name)),
        404: errorResponse('An entity does not exist'),
        422: validationResponse,
      },
    },
  };
});

describeStage('bandit-outcome', (raw, ctx) => {
  const o = raw as BanditOutcomeOptions;
  const pairs = ctx.resource<RecordType>(o.pairs);
  const name = pairs.title.replace(/[^A-Za-z0-9]/g, '');
  const f = fieldsOf(o);
  return {
    schemas: { ...validationSchemas, [name]: pairs.schemas().record },
    operation: {
      tags: ['bandit'],
      summary: 'Update bandit state',
      description:
        'Adds one outcome to the bandit state (pair state and comparison counts) without a comparison record or a rating change. Comparisons do this automatically.',
      requestBody: { required: true, content: { 'application/json': { schema: outcomeBody(f) } } },
      responses: {
        200: jsonResponse('The pair state after the update', ref(name)),
        404: errorResponse('An entity does not exist'),
        422: validationResponse,
      },
    },
  };
});
