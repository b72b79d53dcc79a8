/**
 * pair-suggest: which two entities to compare next (terminal stage), answered as
 * `{entity1, entity2}` (the records), plus `similarity` for the content strategies.
 *
 *   strategy: ucb                the UCB bandit (ucb.ts): cold start, then uncertain pairs,
 *                                exploration constant `exploration`
 *   strategy: anchor-dissimilar  the least compared entity and the partner least like it
 *   strategy: most-dissimilar    the least similar pair;  most-similar: the most similar pair
 *
 * Candidates: every entity while there are at most `pool_size`; beyond that the `pool_size`
 * entities compared least (ties: oldest first), read through the index on the counter field.
 * That is exact for cold start (the least compared are the ones served first) and bounds the
 * work of one suggestion on a large store; pairs outside the pool are not considered.
 * Fewer than two entities is 400.
 */
import {
  definePlugin,
  type Filter,
  type FromSchema,
  GatewayError,
  type JsonSchema,
  respond,
} from '../../runtime/index.ts';
import type { PairState } from '../elo/api.ts';
import { describeStage, errorResponse, jsonResponse, ref, validationSchemas } from '../openapi/api.ts';
import type { RecordType } from '../records/api.ts';
import { type SimilarityStrategy, similarPair } from './similar-pairs.ts';
import { type Embedder, embeddingSimilarity, type Similarity, tfidfSimilarity } from './similarity.ts';
import { type BanditArm, ucbPair } from './ucb.ts';

type Strategy = 'ucb' | SimilarityStrategy;

/** The embedding-models resource's shape (plugins/embed/api.ts), as far as pairing uses it. */
interface EmbeddingModels {
  embed(model: string, texts: string[]): Promise<number[][]>;
}

const FIELD = '^[a-z][a-z0-9_]{0,63}$';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['items', 'strategy'],
  properties: {
    items: { type: 'string', 'x-ref': 'resource', description: 'record-type of the entities.' },
    pairs: {
      type: 'string',
      'x-ref': 'resource',
      description: 'record-type of the pair bandit state (elo-outcome keeps it).',
    },
    strategy: { enum: ['ucb', 'anchor-dissimilar', 'most-dissimilar', 'most-similar'] },
    exploration: { type: 'number', minimum: 0, default: 1, description: 'UCB exploration constant c.' },
    cold_start: {
      type: 'integer',
      minimum: 0,
      default: 1,
      description: 'UCB: entities with fewer comparisons are served first.',
    },
    pool_size: {
      type: 'integer',
      minimum: 2,
      maximum: 1000,
      default: 200,
      description: 'Most candidates considered.',
    },
    rating_field: { type: 'string', pattern: FIELD, default: 'rating' },
    count_field: { type: 'string', pattern: FIELD, description: 'Entity field counting its comparisons.' },
    text_fields: {
      type: 'array',
      items: { type: 'string', pattern: FIELD },
      default: ['name', 'description'],
      description: 'Fields whose text is compared (joined).',
    },
    embedder: {
      type: 'string',
      'x-ref': 'resource',
      description:
        'Resource with embed(texts) → vectors, or an embedding-models resource with embedding_model; without it, TF-IDF cosine.',
    },
    embedding_model: {
      type: 'string',
      description: 'With an embedding-models resource (plugin embed): the model to use, e.g. BGESmallENV15.',
    },
  },
} as const satisfies JsonSchema;
type PairSuggestOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<PairSuggestOptions>({
  name: 'pair-suggest',
  description:
    'Suggest the next pair to compare: UCB bandit, or by content similarity (TF-IDF or an embedding resource).',
  options: optionsSchema,
  create(options, env) {
    const items = env.resource<RecordType>(options.items);
    const pairs = options.pairs ? env.resource<RecordType>(options.pairs) : undefined;
    const poolSize = options.pool_size;
    const rating = options.rating_field;
    const countField = options.count_field;
    const textFields = options.text_fields;
    let similarity: Similarity | undefined;
    if (options.strategy !== 'ucb') {
      if (options.embedder) {
        const resource = env.resource<{ embed?: (...args: never[]) => Promise<number[][]> }>(options.embedder);
        if (typeof resource?.embed !== 'function')
          throw new Error(`resource "${options.embedder}" has no embed function`);
        // An embedding-models resource embeds with a named model: embed(model, texts).
        const model = options.embedding_model;
        const embedder: Embedder = model
          ? { embed: (texts) => (resource as EmbeddingModels).embed(model, texts) }
          : (resource as Embedder);
        similarity = embeddingSimilarity(embedder);
      } else {
        similarity = tfidfSimilarity();
      }
    }
    const initial = Number(items.fields[rating]?.default ?? 1500);
    const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);

    return async (ctx) => {
      const requestId = ctx.state.requestId;
      const store = items.store();
      const { items: pool } = await store.query(items.entityType, {
        order: countField
          ? [
              { field: countField, direction: 'asc' },
              { field: 'id', direction: 'asc' },
            ]
          : [{ field: 'id', direction: 'asc' }],
        limit: poolSize,
        requestId,
      });
      if (pool.length < 2) {
        throw new GatewayError('bad_request', `At least 2 ${items.title.toLowerCase()}s are needed to suggest a pair`, {
          details: { available: pool.length },
        });
      }
      const arms: BanditArm[] = pool.map((e) => ({
        id: e.id,
        rating: num(e.data[rating], initial),
        comparisons: countField ? num(e.data[countField], 0) : 0,
      }));

      const counts = new Map<string, number>();
      if (pairs) {
        const ids = pool.map((e) => e.id);
        const filter: Filter = {
          all: [
            { field: 'entity1_id', op: 'in', value: ids },
            { field: 'entity2_id', op: 'in', value: ids },
          ],
        };
        // Ordered by entity1_id, not id: that lets the database use the entity1_id index for the
        // IN list (ordering by id makes SQLite walk every pair state instead).
        const page = store.limits.maxEntities;
        for (let offset = 0; ; offset += page) {
          const { items: states } = await store.query(pairs.entityType, {
            filter,
            order: [{ field: 'entity1_id', direction: 'asc' }],
            offset,
            limit: page,
            requestId,
          });
          for (const s of states) {
            const d = s.data as PairState;
            counts.set(`${d.entity1_id}:${d.entity2_id}`, d.comparisons);
          }
          if (states.length < page) break;
        }
      }
      const pairCount = (a: number, b: number) => counts.get(a < b ? `${a}:${b}` : `${b}:${a}`) ?? 0;
      const byId = new Map(pool.map((e) => [e.id, e]));

      if (options.strategy === 'ucb') {
        const choice = ucbPair(arms, pairCount, {
          exploration: options.exploration,
          coldStart: options.cold_start,
        });
        respond(ctx, {
          entity1: items.project(byId.get(choice.first.id)!),
          entity2: items.project(byId.get(choice.second.id)!),
        });
        return;
      }
      const texts = pool.map((e) =>
        textFields
          .map((f) => e.data[f])
          .filter((v) => typeof v === 'string')
          .join('\n'),
      );
      const matrix = await similarity!.matrix(texts);
      const choice = similarPair(arms, matrix, pairCount, options.strategy);
      respond(ctx, {
        entity1: items.project(byId.get(choice.first.id)!),
        entity2: items.project(byId.get(choice.second.id)!),
        similarity: choice.similarity,
      });
    };
  },
});

const summaries: Record<Strategy, [string, string]> = {
  ucb: [
    'Next comparison (UCB bandit)',
    'Cold start first (the entity with the fewest comparisons, paired with its best-scoring partner), then the pair maximising ' +
      'score = 4p(1−p)·(u_i+u_j)/2 + c·sqrt(ln(N+1)/(n_ij+1)), with p the Elo win probability, u = 1/sqrt(1+n) the uncertainty of an entity ' +
      'compared n times, n_ij the comparisons of the pair, N all comparisons and c the exploration constant.',
  ],
  'anchor-dissimilar': [
    'Next comparison (similarity-based)',
    'The entity compared least, and the entity least similar to it among those it has not been compared with yet.',
  ],
  'most-dissimilar': ['Dissimilar entities', 'The pair of entities with the lowest content similarity.'],
  'most-similar': ['Similar entities', 'The pair of entities with the highest content similarity.'],
};

describeStage('pair-suggest', (raw, ctx) => {
  const o = raw as PairSuggestOptions;
  const items = ctx.resource<RecordType>(o.items);
  const name = items.title.replace(/[^A-Za-z0-9]/g, '');
  const [summary, description] = summaries[o.strategy];
  const how =
    o.strategy === 'ucb'
      ? ` Exploration constant c = ${o.exploration}.`
      : o.embedder
        ? ' Similarity: cosine of embeddings of name and description.'
        : ' Similarity: TF-IDF cosine of name and description.';
  const properties: Record<string, unknown> = { entity1: ref(name), entity2: ref(name) };
  if (o.strategy !== 'ucb') properties.similarity = { type: 'number' };
  return {
    schemas: { ...validationSchemas, [name]: items.schemas().record },
    operation: {
      tags: ['pairs'],
      summary,
      description: `${description}${how} Candidates: at most ${o.pool_size} entities, those compared least.`,
      responses: {
        200: jsonResponse('A pair', { type: 'object', required: Object.keys(properties), properties }),
        400: errorResponse('Fewer than 2 entities'),
      },
    },
  };
});
