/**
 * The classifier set behind the `classifier-set` resource: the configured classifiers by name.
 * Classifiers that are not loaded yet (ML models, which load lazily) are loaded on first use or by
 * warmup(); a load is shared by concurrent callers since `load()` is idempotent.
 *
 * classify() of classifiers that answer at once (Tier A) is batched per turn of the event loop
 * (TurnBatch): the texts of the requests read in one turn go through each classifier in a row,
 * which keeps its code hot (docs/architecture.md, "Per-turn batches"). `batch: false` classifies
 * each text at once instead.
 *
 * A text longer than 16 KiB is classified by those classifiers in a worker thread instead
 * (Classifier.offLoop, set-worker.ts; one job per text for all of them), bounded like the model's
 * long texts (long-text-worker.ts): their scan grows with the text and must not hold the loop.
 */
import { TurnBatch } from '../../runtime/index.ts';
import type {
  Classifier,
  ClassifierInfo,
  ClassifierResult,
  ClassifierSet,
  ClassifierTrigger,
  ClassifyOptions,
  OffLoopSpec,
} from './api.ts';
import { type LongTextLimits, LongTextWorker, longTextLimits } from './long-text-worker.ts';
import { type PackedResult, unpackResult } from './packed-results.ts';
import type { SetWorkerJob } from './set-worker.ts';

const SET_WORKER = new URL('./set-worker.ts', import.meta.url);

type Results = Record<string, ClassifierResult>;
interface Job {
  selected: Classifier[];
  text: string;
  options?: ClassifyOptions;
}

export class NamedClassifierSet implements ClassifierSet {
  readonly #byName: ReadonlyMap<string, Classifier>;
  readonly #batch?: TurnBatch<Job, Results>;
  #all?: Classifier[];
  readonly #selected = new WeakMap<string[], Classifier[]>();
  readonly #longTextLimits: LongTextLimits;
  /** The worker of long texts, started at the first one. */
  longTexts: LongTextWorker<PackedResult[]> | undefined;

  constructor(classifiers: Classifier[], options: { batch?: boolean; longTexts?: LongTextLimits } = {}) {
    this.#longTextLimits = options.longTexts ?? longTextLimits;
    // not the schema default: the constructor's own, for sets built outside the resource (tests, tools)
    if (options.batch ?? true) this.#batch = new TurnBatch(classifyBatch);
    const byName = new Map<string, Classifier>();
    for (const c of classifiers) {
      if (byName.has(c.name)) throw new Error(`classifier "${c.name}" is declared twice`);
      byName.set(c.name, c);
    }
    this.#byName = byName;
  }

  list(): ClassifierInfo[] {
    return [...this.#byName.values()].map((c) => c.info());
  }

  get(name: string): Classifier | undefined {
    return this.#byName.get(name);
  }

  classifySync(
    names: string[] | undefined,
    text: string,
    options?: ClassifyOptions,
  ): Record<string, ClassifierResult> | undefined {
    const selected = this.#select(names);
    // A long text is classify()'s, off the loop (a stream's one huge delta is its whole window).
    if (this.#goesOffLoop(selected, text)) return undefined;
    const out: Record<string, ClassifierResult> = {};
    for (const c of selected) {
      if (!c.classifySync) return undefined;
    }
    for (const c of selected) {
      out[c.name] = (c.classifySync as (text: string, o?: ClassifyOptions) => ClassifierResult).call(c, text, options);
    }
    return out;
  }

  classify(
    names: string[] | undefined,
    text: string,
    options?: ClassifyOptions,
  ): Promise<Record<string, ClassifierResult>> {
    let selected: Classifier[];
    try {
      selected = this.#select(names);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.#goesOffLoop(selected, text)) return this.#classifyLong(selected, text, options);
    // The batch's own promise, no async frame around it (docs/performance.md, "Work per request").
    if (this.#batch && selected.every((c) => c.classifySync !== undefined)) {
      return this.#batch.add({ selected, text, options });
    }
    return this.#classifyEach(selected, text, options);
  }

  async #classifyEach(
    selected: Classifier[],
    text: string,
    options?: ClassifyOptions,
  ): Promise<Record<string, ClassifierResult>> {
    // Classifiers that answer at once do so in turn; the others (models) run side by side.
    const results = new Array<ClassifierResult>(selected.length);
    let waiting: Promise<void>[] | undefined;
    for (let i = 0; i < selected.length; i++) {
      const c = selected[i];
      if (c.classifySync) results[i] = c.classifySync(text, options);
      else {
        waiting ??= [];
        waiting.push(
          loadAndClassify(c, text).then((r) => {
            results[i] = r;
          }),
        );
      }
    }
    if (waiting) await Promise.all(waiting);
    const out: Record<string, ClassifierResult> = {};
    for (let i = 0; i < selected.length; i++) out[selected[i].name] = results[i];
    return out;
  }

  /** Whether `text` is long enough, and one of `selected` able, to be classified in the worker. */
  #goesOffLoop(selected: Classifier[], text: string): boolean {
    return text.length > this.#longTextLimits.chars && selected.some((c) => c.offLoop !== undefined);
  }

  /** A long text: the classifiers that can go off the loop in one worker job, the others as usual. */
  async #classifyLong(
    selected: Classifier[],
    text: string,
    options?: ClassifyOptions,
  ): Promise<Record<string, ClassifierResult>> {
    const offLoop = selected.filter((c) => c.offLoop !== undefined);
    const rest = selected.filter((c) => c.offLoop === undefined);
    this.longTexts ??= new LongTextWorker(SET_WORKER, undefined, 'classifiers', this.#longTextLimits);
    const job: SetWorkerJob = { classifiers: offLoop.map((c) => c.offLoop as OffLoopSpec), options };
    const [there, here] = await Promise.all([
      this.longTexts.run(text, job),
      rest.length > 0 ? this.#classifyEach(rest, text, options) : undefined,
    ]);
    const byName = new Map(offLoop.map((c, i) => [c.name, unpackResult(there[i])]));
    const out: Record<string, ClassifierResult> = {};
    for (const c of selected) out[c.name] = byName.get(c.name) ?? (here as Results)[c.name];
    return out;
  }

  async warmup(): Promise<{ models_loaded: number; duration_ms: number }> {
    const started = performance.now();
    const all = [...this.#byName.values()];
    // Every load is attempted even when one fails, so one broken model does not hold back the rest.
    const outcomes = await Promise.allSettled(all.map((c) => c.load()));
    const failed = outcomes.flatMap((o, i) =>
      o.status === 'rejected' ? [`${all[i].name}: ${(o.reason as Error)?.message ?? o.reason}`] : [],
    );
    if (failed.length > 0) throw new Error(`warm-up failed for ${failed.join('; ')}`);
    const models = this.list().filter((i) => i.type === 'ml' && i.status === 'loaded').length;
    return { models_loaded: models, duration_ms: Math.round((performance.now() - started) * 1000) / 1000 };
  }

  ready(): boolean {
    return this.list().every((i) => i.status === 'loaded');
  }

  maxSpanChars(names?: string[]): number {
    let max = 0;
    for (const c of this.#select(names)) max = Math.max(max, c.maxSpanChars);
    return max;
  }

  detectChars(names?: string[]): number {
    let max = 0;
    for (const c of this.#select(names)) max = Math.max(max, c.detectChars);
    return max;
  }

  releasePoint(names: string[] | undefined, text: string): number | undefined {
    const selected = this.#select(names);
    let least = text.length;
    for (let i = 0; i < selected.length; i++) {
      const c = selected[i] as Classifier;
      if (c.releasePoint === undefined) return undefined;
      const at = c.releasePoint(text);
      if (at < least) least = at;
    }
    return least;
  }

  trigger(names?: string[]): ClassifierTrigger | undefined {
    const selected = this.#select(names);
    const triggers: ClassifierTrigger[] = [];
    for (const c of selected) {
      if (!c.trigger) return undefined;
      triggers.push(c.trigger);
    }
    if (triggers.length === 1) return triggers[0];
    return {
      reach: Math.max(0, ...triggers.map((t) => t.reach)),
      test: (text) => {
        for (const t of triggers) if (t.test(text)) return true;
        return false;
      },
    };
  }

  async close(): Promise<void> {
    const longTexts = this.longTexts;
    this.longTexts = undefined;
    await Promise.allSettled([...[...this.#byName.values()].map((c) => c.close?.()), longTexts?.close()]);
  }

  #select(names: string[] | undefined): Classifier[] {
    if (names === undefined) {
      this.#all ??= [...this.#byName.values()];
      return this.#all;
    }
    // A stream asks with the same list at every chunk: looked up once per list.
    let selected = this.#selected.get(names);
    if (selected === undefined || !sameNames(selected, names)) {
      selected = names.map((n) => this.#require(n));
      this.#selected.set(names, selected);
    }
    return selected;
  }

  #require(name: string): Classifier {
    const c = this.#byName.get(name);
    if (!c) throw new Error(`unknown classifier "${name}" (configured: ${[...this.#byName.keys()].join(', ')})`);
    return c;
  }
}

/** Whether the list still names these classifiers (a list changed in place is looked up again). */
function sameNames(selected: readonly Classifier[], names: readonly string[]): boolean {
  if (selected.length !== names.length) return false;
  for (let i = 0; i < names.length; i++) if (selected[i].name !== names[i]) return false;
  return true;
}

/**
 * One turn's texts, classifier by classifier (each runs over every text that selected it before
 * the next one starts); a classifier that throws fails only that text.
 */
function classifyBatch(jobs: readonly Job[], fail: (index: number, reason: unknown) => void): Results[] {
  const outputs = jobs.map(() => ({}) as Results);
  const failed: boolean[] = [];
  const order: Classifier[] = [];
  for (const job of jobs) for (const c of job.selected) if (!order.includes(c)) order.push(c);
  for (const c of order) {
    const run = c.classifySync as (text: string, options?: ClassifyOptions) => ClassifierResult;
    for (let i = 0; i < jobs.length; i++) {
      if (failed[i] || !jobs[i].selected.includes(c)) continue;
      try {
        outputs[i][c.name] = run.call(c, jobs[i].text, jobs[i].options);
      } catch (err) {
        failed[i] = true;
        fail(i, err);
      }
    }
  }
  // Results keyed in the order the caller named the classifiers, as classify() without batching.
  return outputs.map((out, i) => {
    const selected = jobs[i].selected;
    if (selected.length === order.length && selected.every((c, k) => order[k] === c)) return out;
    const ordered: Results = {};
    for (const c of selected) ordered[c.name] = out[c.name];
    return ordered;
  });
}

async function loadAndClassify(c: Classifier, text: string): Promise<ClassifierResult> {
  if (c.info().status !== 'loaded') await c.load();
  return c.classify(text);
}
