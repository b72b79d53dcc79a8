/**
 * The `classifier-set` resource: the classifiers a service runs, declared once and shared by the
 * `classify` stages and the admin endpoints (classifiers-api).
 *
 *   resources:
 *     classifiers:
 *       type: classifier-set
 *       models_dir: ./models
 *       classifiers:
 *         - { name: pii, type: pattern, detectors: [pii] }
 *         - { name: injection, type: pattern, detectors: [prompt_injection, jailbreak] }
 *         - { name: injection_ml, type: ml, ... }            # see ml/index.ts
 *
 * Pattern classifiers (Tier A) are ready when the resource is created; ML classifiers (Tier B)
 * load in the background from the start (`load: background`, the default; the service answers
 * meanwhile and a request that needs a model waits for it), or on first use (`load: lazy`).
 * Health says `loading` until every one is loaded; the end is logged with its time.
 */
import { defineResource, type FromSchema, type JsonSchema } from '../../runtime/index.ts';
import type { Classifier, ClassifierSet } from './api.ts';
import { createMlClassifier, mlClassifierSchema } from './ml/index.ts';
import { DETECTOR_NAMES, DETECTORS } from './patterns/catalog.ts';
import { PatternClassifier, type PatternClassifierSpec } from './patterns/classifier.ts';
import { DEFAULT_PHONE_REGIONS, PHONE_REGION_CODES } from './patterns/phone.ts';
import { NamedClassifierSet } from './set.ts';

interface ClassifierEntry {
  name: string;
  type: 'pattern' | 'ml';
  [k: string]: unknown;
}

const name = {
  type: 'string',
  pattern: '^[A-Za-z0-9_.-]+$',
  description: 'Name of the classifier (in results, policies and the admin endpoints).',
};
const tier = {
  enum: ['A', 'B'],
  description: 'Tier reported by GET /admin/classifiers (pattern: A, ml: B by default).',
};

const patternEntry: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'type', 'detectors'],
  properties: {
    name,
    type: { const: 'pattern' },
    tier: { ...tier, default: 'A' },
    detectors: {
      type: 'array',
      minItems: 1,
      items: { enum: [...DETECTOR_NAMES] },
      description: 'Detector families (pii, secrets, prompt_injection, jailbreak) and/or single detectors.',
    },
    threshold: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      default: 0.5,
      description: 'Score from which the positive label is reported.',
    },
    labels: {
      type: 'object',
      additionalProperties: false,
      properties: {
        positive: { type: 'string', minLength: 1, description: 'Label at or above the threshold.' },
        negative: { type: 'string', minLength: 1, description: 'Label below the threshold.' },
      },
      description: 'Labels to report instead of the family defaults (pii/secret/injection/jailbreak, clean/benign).',
    },
    weights: {
      type: 'object',
      propertyNames: { enum: DETECTORS.map((d) => d.id) },
      additionalProperties: { type: 'number', minimum: 0, maximum: 1 },
      description: 'Weight of every match of the given detectors, replacing their built-in weights.',
    },
    phone_regions: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: { enum: [...PHONE_REGION_CODES] },
      description:
        `Regions (ISO 3166 alpha-2) whose national phone formats the phone detector recognises (default: ${DEFAULT_PHONE_REGIONS.join(', ')}); ` +
        'international numbers (+ or 00) of every country are found anyway.',
    },
  },
};

function mlEntry(): JsonSchema {
  const ml = mlClassifierSchema as { properties?: Record<string, unknown>; required?: string[] };
  return {
    type: 'object',
    additionalProperties: false,
    required: [...new Set(['name', 'type', ...(ml.required ?? [])])],
    properties: { name, tier: { ...tier, default: 'B' }, ...ml.properties, type: { const: 'ml' } },
  };
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['classifiers'],
  properties: {
    models_dir: {
      type: 'string',
      minLength: 1,
      default: 'models',
      description: 'Directory of the ML models, relative to the config file.',
    },
    load: {
      enum: ['background', 'lazy'],
      default: 'background',
      description:
        'When ML models load: background (from the start, without holding it up; the end is logged) or lazy (on first use).',
    },
    batch: {
      type: 'boolean',
      default: true,
      description:
        'Run the Tier A classifiers of the requests read in one turn of the event loop together, classifier by ' +
        'classifier (less CPU per request under load: their code stays hot); false: each request at once.',
    },
    classifiers: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['name', 'type'],
        properties: { type: { enum: ['pattern', 'ml'] } },
        if: { required: ['type'], properties: { type: { const: 'ml' } } },
        // biome-ignore lint/suspicious/noThenProperty: JSON Schema keyword
        then: mlEntry(),
        else: patternEntry,
      },
    },
  },
} as const satisfies JsonSchema;

/** Each entry's shape hangs on an if/then/else (pattern or ml), which FromSchema does not type: it is written out. */
export type ClassifierSetOptions = Omit<FromSchema<typeof optionsSchema>, 'classifiers'> & {
  classifiers: ClassifierEntry[];
};

export default defineResource<ClassifierSetOptions, ClassifierSet>({
  type: 'classifier-set',
  description: 'Classifiers (Tier A patterns, Tier B ML models) shared by classify stages and the admin endpoints.',
  options: optionsSchema,
  create(options, env) {
    const modelsDir = env.resolvePath(options.models_dir);
    const classifiers: Classifier[] = options.classifiers.map((entry) =>
      entry.type === 'ml'
        ? createMlClassifier(entry, { modelsDir, logger: env.logger.child({ classifier: entry.name }) })
        : new PatternClassifier(entry as unknown as PatternClassifierSpec),
    );
    const set = new NamedClassifierSet(classifiers, { batch: options.batch });
    const statuses = () => Object.fromEntries(set.list().map((i) => [i.name, i.status]));
    env.logger.info({ classifiers: statuses() }, 'classifiers created');
    if (options.load === 'background' && !set.ready()) {
      const started = performance.now();
      set.warmup().then(
        ({ models_loaded }) =>
          env.logger.info({ models_loaded, load_ms: Math.round(performance.now() - started) }, 'classifiers ready'),
        // Each failed model has logged why; health reports it and a request needing it retries the load.
        (err: Error) => env.logger.warn({ err: err.message }, 'classifiers not all loaded'),
      );
    }
    return {
      value: set,
      health: () => {
        const list = set.list();
        const failed = list.filter((i) => i.status === 'error');
        const ok = list.every((i) => i.status === 'loaded');
        return {
          ok,
          status: failed.length > 0 ? 'error' : ok ? 'loaded' : 'loading',
          ...(failed.length > 0 ? { error: failed.map((i) => `${i.name}: ${i.error ?? 'failed'}`).join('; ') } : {}),
          detail: { classifiers: statuses() },
        };
      },
      describe: () => ({
        models_dir: modelsDir,
        classifiers: statuses(),
        // What a stream must hold back to see any match whole (0: no spans).
        max_span_chars: Object.fromEntries(set.list().map((i) => [i.name, set.maxSpanChars([i.name])])),
        // What a stream whose rules only block must hold back to fire before a match is sent.
        detect_chars: Object.fromEntries(set.list().map((i) => [i.name, set.detectChars([i.name])])),
      }),
      close: () => set.close(),
    };
  },
});
