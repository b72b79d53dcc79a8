/**
 * classifiers-api: admin operations on a classifier-set resource, one per route (terminal stage).
 *
 *   GET  /admin/classifiers       op: list     {classifiers: [{name, tier, type, status, model?}]}
 *   POST /admin/test-classifier   op: test     {classifier, text} → {classifier, score, label, confidence, latency_ms}
 *   POST /admin/warmup            op: warmup   {status: complete, models_loaded, duration_ms}
 *
 * `test` runs the classifier as a request would (an ML model not loaded yet is loaded first); the
 * text is never logged. A classifier that fails to load or run is a 503 naming it.
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
import type { ClassifierInfo, ClassifierSet } from '../classify/api.ts';

type Op = 'list' | 'test' | 'warmup';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['op'],
  properties: {
    classifiers: {
      type: 'string',
      minLength: 1,
      default: 'classifiers',
      'x-ref': 'resource',
      description: 'Name of the classifier-set resource.',
    },
    op: { enum: ['list', 'test', 'warmup'], description: 'Operation of this route.' },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'classifiers-api',
  description: 'Admin endpoints of a classifier set: list classifiers, test one on a text, warm up all models.',
  options: optionsSchema,
  create(options, env) {
    const set = env.resource<ClassifierSet>(options.classifiers);
    const handlers: Record<Op, (ctx: GatewayContext) => Promise<void>> = {
      list: async (ctx) => {
        respond(ctx, { classifiers: set.list().map(publicInfo) });
      },
      test: (ctx) => test(ctx, set),
      warmup: async (ctx) => {
        let outcome: { models_loaded: number; duration_ms: number };
        try {
          outcome = await set.warmup();
        } catch (err) {
          throw new GatewayError('unavailable', (err as Error).message, { cause: err });
        }
        env.logger.info(outcome, 'classifiers warmed up');
        respond(ctx, { status: 'complete', ...outcome });
      },
    };
    const handle = handlers[options.op];
    return {
      handle: async (ctx) => handle(ctx),
      describe: () => ({ op: options.op, classifiers: options.classifiers }),
    };
  },
});

/** The classifier fields of the API: model only for ml, error only when loading failed. */
function publicInfo(i: ClassifierInfo): Record<string, unknown> {
  return {
    name: i.name,
    tier: i.tier,
    type: i.type,
    status: i.status,
    ...(i.type === 'ml' && i.model !== undefined ? { model: i.model } : {}),
    ...(i.status === 'error' && i.error !== undefined ? { error: i.error } : {}),
  };
}

async function test(ctx: GatewayContext, set: ClassifierSet): Promise<void> {
  const body = await readJsonObject(ctx);
  const name = requireString(body, 'classifier');
  const text = requireString(body, 'text', true);
  if (!set.get(name)) {
    throw new GatewayError('not_found', `Classifier "${name}" is not configured`, {
      code: 'classifier_not_found',
      details: { classifier: name, available: set.list().map((i) => i.name) },
    });
  }
  let results: Awaited<ReturnType<ClassifierSet['classify']>>;
  try {
    results = await set.classify([name], text);
  } catch (err) {
    throw new GatewayError('unavailable', `Classifier "${name}" failed: ${(err as Error).message}`, {
      details: { classifier: name },
      cause: err,
    });
  }
  const r = results[name];
  respond(ctx, {
    classifier: name,
    score: r.score,
    label: r.label,
    confidence: r.confidence,
    latency_ms: r.latency_ms,
  });
}

function requireString(body: Record<string, unknown>, field: string, allowEmpty = false): string {
  const value = body[field];
  if (value === undefined) throw fieldError(field, 'is required');
  if (typeof value !== 'string') throw fieldError(field, 'must be a string');
  if (!allowEmpty && value === '') throw fieldError(field, 'must not be empty');
  return value;
}

function fieldError(field: string, problem: string): GatewayError {
  return new GatewayError('bad_request', `Field "${field}" ${problem}`, { details: { field } });
}
