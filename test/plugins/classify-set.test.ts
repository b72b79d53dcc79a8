/**
 * The classifier set's contract (lazy loading, warm-up, readiness) and the build-time checks of the
 * resource and the stage. A small lazily-loading classifier stands in for an ML model so that the
 * set's behaviour is tested without depending on a model file.
 */
import { describe, expect, it } from 'vitest';
import type { Classifier, ClassifierInfo, ClassifierResult, ClassifierSet } from '../../plugins/classify/api.ts';
import classify from '../../plugins/classify/index.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { NamedClassifierSet } from '../../plugins/classify/set.ts';
import type { PluginDefinition, ResourceDefinition } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

/** Loads on demand, counts its loads, and can be told to fail. */
class LazyClassifier implements Classifier {
  readonly maxSpanChars = 0; // reports no spans, as a model
  readonly detectChars = 0;
  loads = 0;
  #status: ClassifierInfo['status'] = 'loading';
  constructor(
    readonly name: string,
    private readonly fail = false,
  ) {}
  info(): ClassifierInfo {
    return { name: this.name, tier: 'B', type: 'ml', status: this.#status, model: 'lazy' };
  }
  async load(): Promise<void> {
    this.loads++;
    if (this.fail) {
      this.#status = 'error';
      throw new Error('model file missing');
    }
    this.#status = 'loaded';
  }
  async classify(text: string): Promise<ClassifierResult> {
    if (this.#status !== 'loaded') throw new Error('not loaded');
    return {
      classifier: this.name,
      label: 'x',
      score: text.length > 3 ? 1 : 0,
      confidence: 1,
      spans: [],
      latency_ms: 0,
    };
  }
}

const pattern = () => new PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] });

/** Answers at once (as Tier A does), notes each call in `calls`, and throws on the text `boom`. */
class RecordingClassifier implements Classifier {
  readonly maxSpanChars = 0;
  readonly detectChars = 0;
  constructor(
    readonly name: string,
    private readonly calls: string[],
  ) {}
  info(): ClassifierInfo {
    return { name: this.name, tier: 'A', type: 'pattern', status: 'loaded' };
  }
  async load(): Promise<void> {}
  async classify(text: string): Promise<ClassifierResult> {
    return this.classifySync(text);
  }
  classifySync(text: string): ClassifierResult {
    this.calls.push(`${this.name}(${text})`);
    if (text === 'boom') throw new Error(`${this.name} failed`);
    return { classifier: this.name, label: text, score: text.length / 10, confidence: 1, spans: [], latency_ms: 0 };
  }
}

describe('NamedClassifierSet', () => {
  it('answers at once when every named classifier can, the same as classify; not when one must wait', async () => {
    const lazy = new LazyClassifier('lazy');
    const set = new NamedClassifierSet([pattern(), lazy]);
    const text = 'write to jane@example.org';
    const now = set.classifySync(['pii'], text);
    expect(now?.pii.score).toBeGreaterThan(0.5);
    const { latency_ms: _a, ...sync } = now?.pii ?? {};
    const { latency_ms: _b, ...async } = (await set.classify(['pii'], text)).pii;
    expect(sync).toEqual(async);
    expect(set.classifySync(undefined, text)).toBeUndefined();
    expect(set.classifySync(['lazy'], text)).toBeUndefined();
    expect(lazy.loads).toBe(0); // nothing was started for the classifier that must wait
    expect(() => set.classifySync(['nope'], text)).toThrow(/unknown classifier "nope"/);
  });

  it('loads a classifier on first use and runs only the named ones', async () => {
    const lazy = new LazyClassifier('lazy');
    const set = new NamedClassifierSet([pattern(), lazy]);
    expect(set.ready()).toBe(false);
    expect(Object.keys(await set.classify(['pii'], 'a@b.io'))).toEqual(['pii']);
    expect(lazy.loads).toBe(0);
    const all = await set.classify(undefined, 'hello');
    expect(Object.keys(all)).toEqual(['pii', 'lazy']);
    expect(all.lazy.score).toBe(1);
    expect(lazy.loads).toBe(1);
    expect(set.ready()).toBe(true);
    await set.classify(undefined, 'again');
    expect(lazy.loads).toBe(1);
  });

  it('warm-up loads everything and counts the ML models', async () => {
    const set = new NamedClassifierSet([pattern(), new LazyClassifier('a'), new LazyClassifier('b')]);
    const outcome = await set.warmup();
    expect(outcome.models_loaded).toBe(2);
    expect(outcome.duration_ms).toBeGreaterThanOrEqual(0);
    expect(set.ready()).toBe(true);
  });

  it('a failed load is reported by warm-up, naming the classifier, after trying the others', async () => {
    const ok = new LazyClassifier('ok');
    const set = new NamedClassifierSet([new LazyClassifier('broken', true), ok]);
    await expect(set.warmup()).rejects.toThrow('warm-up failed for broken: model file missing');
    expect(ok.info().status).toBe('loaded');
    expect(set.ready()).toBe(false);
  });

  it('classifies the texts of one turn classifier by classifier, each caller getting its own results', async () => {
    const calls: string[] = [];
    const set = new NamedClassifierSet([new RecordingClassifier('a', calls), new RecordingClassifier('b', calls)]);
    const [one, two, three] = await Promise.all([
      set.classify(undefined, 'one'),
      set.classify(['b', 'a'], 'two'),
      set.classify(['b'], 'three'),
    ]);
    expect(calls).toEqual(['a(one)', 'a(two)', 'b(one)', 'b(two)', 'b(three)']);
    expect(Object.keys(one)).toEqual(['a', 'b']);
    expect(Object.keys(two)).toEqual(['b', 'a']); // the order the caller named them
    expect(Object.keys(three)).toEqual(['b']);
    expect([one.a.label, two.a.label, three.b.label]).toEqual(['one', 'two', 'three']);
    expect(three.b.score).toBeCloseTo(0.5);
  });

  it('a classifier that throws in a batch fails only the text it threw on', async () => {
    const set = new NamedClassifierSet([new RecordingClassifier('a', [])]);
    const [ok, failed] = await Promise.allSettled([set.classify(undefined, 'fine'), set.classify(undefined, 'boom')]);
    expect(ok.status === 'fulfilled' && ok.value.a.label).toBe('fine');
    expect(failed.status === 'rejected' && (failed.reason as Error).message).toBe('a failed');
  });

  it('batch: false classifies each text at once, with the same results', async () => {
    const calls: string[] = [];
    const set = new NamedClassifierSet([new RecordingClassifier('a', calls), new RecordingClassifier('b', calls)], {
      batch: false,
    });
    const results = await Promise.all([set.classify(undefined, 'one'), set.classify(undefined, 'two')]);
    expect(calls).toEqual(['a(one)', 'b(one)', 'a(two)', 'b(two)']);
    const batched = new NamedClassifierSet([new RecordingClassifier('a', []), new RecordingClassifier('b', [])]);
    expect(await Promise.all([batched.classify(undefined, 'one'), batched.classify(undefined, 'two')])).toEqual(
      results,
    );
  });

  it('refuses unknown names and duplicates', async () => {
    const set = new NamedClassifierSet([pattern()]);
    await expect(set.classify(['nope'], 'x')).rejects.toThrow(/unknown classifier "nope"/);
    expect(() => new NamedClassifierSet([pattern(), pattern()])).toThrow(/declared twice/);
  });
});

describe('build-time checks', () => {
  const [resource, stage] = classify as unknown as [
    ResourceDefinition<Record<string, unknown>, ClassifierSet>,
    PluginDefinition<Record<string, unknown>>,
  ];

  it('the resource builds pattern classifiers and reports health', async () => {
    const instance = await resource.create(
      { classifiers: [{ name: 'pii', type: 'pattern', detectors: ['email'] }] },
      createTestEnv(),
    );
    expect(instance.value.list()).toEqual([{ name: 'pii', tier: 'A', type: 'pattern', status: 'loaded' }]);
    expect(await instance.health?.()).toMatchObject({ ok: true, status: 'loaded' });
  });

  it('the resource refuses duplicate names and unknown detectors', async () => {
    const entry = { name: 'pii', type: 'pattern', detectors: ['email'] };
    const create = async (classifiers: unknown[]) => resource.create({ classifiers }, createTestEnv());
    await expect(create([entry, entry])).rejects.toThrow(/declared twice/);
    await expect(create([{ ...entry, detectors: ['nope'] }])).rejects.toThrow(
      /classifiers\/0\/detectors\/0 must be equal to one of the allowed values/,
    );
  });

  it('the stage refuses a `use` name the set does not have', async () => {
    const set = new NamedClassifierSet([pattern()]);
    const env = createTestEnv({ resources: { classifiers: set } });
    await expect((async () => stage.create({ use: ['pii', 'toxicity'] }, env))()).rejects.toThrow(
      /classifier "toxicity" is not in resource "classifiers"/,
    );
  });
});
