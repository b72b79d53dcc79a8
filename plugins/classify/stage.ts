/**
 * The `classify` stage: runs classifiers of a classifier-set resource on the text of an
 * OpenAI-style request (every field a model reads, as the runtime's wire reader finds it:
 * `openaiWire.requestText`) and leaves the results in `ctx.state.classifications` for the stages after
 * it (policy, redaction, audit). It decides nothing itself.
 *
 *   - classify: { classifiers: classifiers, use: [pii, injection] }
 *
 * Timing: `annotations.classify_latency_ms` accumulates the time spent in classify stages of the
 * request; `switchyard_classifier_latency_seconds{classifier}` records each classifier's latency.
 * A classifier that fails (an ML model that cannot load) fails the stage: fail-closed by default,
 * `on_error: fail-open` to go on without its results.
 */
import {
  compileStatePath,
  definePlugin,
  type FromSchema,
  type JsonSchema,
  latencyBuckets,
  openaiWire,
  readJsonObject,
  stateFieldOf,
} from '../../runtime/index.ts';
import type { ClassifierSet } from './api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    classifiers: {
      type: 'string',
      minLength: 1,
      default: 'classifiers',
      'x-ref': 'resource',
      description: 'classifier-set resource to use.',
    },
    use: {
      type: 'array',
      items: { type: 'string', minLength: 1 },
      uniqueItems: true,
      description: 'Classifiers to run, by name. Default: every classifier of the set.',
    },
    use_from: {
      type: 'string',
      minLength: 1,
      description:
        'State path to a list of classifier names chosen per request (e.g. `caller.attributes.classifiers`, ' +
        "a tenant's); names the set lacks are skipped. Falls back to `use` when absent.",
    },
    text: {
      enum: ['request'],
      default: 'request',
      description:
        'What to classify: the request (every field an OpenAI-style request shows the model: messages, tools, ' +
        'prompt, suffix, response schema; joined by newlines).',
    },
  },
} as const satisfies JsonSchema;

export type ClassifyOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ClassifyOptions>({
  name: 'classify',
  dryRun: 'run',
  description: 'Run classifiers on the request text (every field a model reads) into ctx.state.classifications.',
  needs: (o) => stateFieldOf(o.use_from),
  provides: ['classifications'],
  options: optionsSchema,
  create(options, env) {
    const resourceName = options.classifiers;
    const set = env.resource<ClassifierSet>(resourceName);
    const use = options.use;
    for (const name of use ?? []) {
      if (!set.get(name)) {
        const known = set.list().map((i) => i.name);
        throw new Error(`classifier "${name}" is not in resource "${resourceName}" (it has: ${known.join(', ')})`);
      }
    }
    const latency = env.metrics.histogram({
      name: 'switchyard_classifier_latency_seconds',
      help: 'Time each classifier took on a request, by classifier',
      labelNames: ['classifier'] as const,
      buckets: latencyBuckets,
    });
    const useFrom = options.use_from ? compileStatePath(options.use_from) : undefined;
    // The lists come from shared objects (a tenant's), so each is filtered once.
    const known = new WeakMap<unknown[], string[]>();
    /** The per-request choice of classifiers, if the state carries one. */
    const chosen = (state: unknown): string[] | undefined => {
      const node = useFrom?.(state);
      if (!Array.isArray(node)) return undefined;
      let names = known.get(node);
      if (!names) {
        names = node.filter((n): n is string => typeof n === 'string' && set.get(n) !== undefined);
        // Only a list nobody can change is remembered.
        if (Object.isFrozen(node)) known.set(node, names);
      }
      return names;
    };
    return {
      async handle(ctx, next) {
        const started = performance.now();
        const text = openaiWire.requestText(await readJsonObject(ctx));
        const results = await set.classify(chosen(ctx.state) ?? use, text);
        for (const [name, r] of Object.entries(results)) latency.observe({ classifier: name }, r.latency_ms / 1000);
        ctx.state.classifications = results;
        const spent = performance.now() - started;
        const before = ctx.state.annotations.classify_latency_ms;
        ctx.state.annotations.classify_latency_ms = (typeof before === 'number' ? before : 0) + spent;
        // All safety checks together (classifiers and policies), e.g. for a latency header.
        const checks = ctx.state.annotations.check_latency_ms;
        ctx.state.annotations.check_latency_ms = (typeof checks === 'number' ? checks : 0) + spent;
        await next();
      },
      describe: () => ({ classifiers: resourceName, use: use ?? set.list().map((i) => i.name) }),
    };
  },
});
