/**
 * What every Tier B classifier shares: the status life cycle (loading → loaded | error),
 * idempotent and lazy loading, batching of concurrent calls, and the result shape.
 * A format implements `open` (read files, create the session) and `predict` (a batch of texts).
 */
import type { Logger } from 'pino';
import type { Classifier, ClassifierInfo, ClassifierResult } from '../api.ts';
import { Batcher } from './batcher.ts';
import type { Prediction } from './probabilities.ts';

export abstract class ModelClassifier implements Classifier {
  /**
   * Models judge the text they are given as a whole and report no spans: nothing for a stream to
   * hold back for them (a block acts on the window they saw).
   */
  readonly maxSpanChars = 0;
  /** No detectors: a model's score is on the window it is given, whatever a stream holds back. */
  readonly detectChars = 0;
  private status: ClassifierInfo['status'] = 'loading';
  private error: string | undefined;
  private loading: Promise<void> | undefined;
  private readonly batcher: Batcher<string, Prediction>;

  constructor(
    readonly name: string,
    /** Shown as `model` in the classifier list. */
    protected readonly modelName: string,
    /** The resource hands each classifier a child logger that already names it. */
    protected readonly logger: Logger,
    maxBatch: number,
  ) {
    this.batcher = new Batcher(maxBatch, (texts) => this.predict(texts));
  }

  /** Reads the model's files and creates its session; throws with a message naming what is wrong. */
  protected abstract open(): Promise<void>;
  /** Predicts a batch of texts (never called before `open` succeeded, never concurrently). */
  protected abstract predict(texts: string[]): Promise<Prediction[]>;
  /** Frees native resources. */
  protected async release(): Promise<void> {}

  info(): ClassifierInfo {
    return {
      name: this.name,
      tier: 'B',
      type: 'ml',
      status: this.status,
      model: this.modelName,
      ...(this.error ? { error: this.error } : {}),
    };
  }

  protected get loaded(): boolean {
    return this.status === 'loaded';
  }

  /** Loads once; concurrent callers share the same load. After a failure the next call tries again. */
  load(): Promise<void> {
    if (this.status === 'loaded') return Promise.resolve();
    if (!this.loading) {
      const started = performance.now();
      this.status = 'loading';
      this.error = undefined;
      this.loading = this.open().then(
        () => {
          this.status = 'loaded';
          this.logger.info(
            { classifier: this.name, model: this.modelName, load_ms: Math.round(performance.now() - started) },
            'model loaded',
          );
        },
        (err: unknown) => {
          this.status = 'error';
          this.error = err instanceof Error ? err.message : String(err);
          this.loading = undefined;
          this.logger.error(
            { classifier: this.name, model: this.modelName, error: this.error },
            'model failed to load',
          );
          throw new Error(`classifier "${this.name}": ${this.error}`);
        },
      );
    }
    return this.loading;
  }

  async classify(text: string): Promise<ClassifierResult> {
    if (this.status !== 'loaded') await this.load();
    const started = performance.now();
    const prediction = await this.batcher.submit(text);
    return this.result(prediction, performance.now() - started);
  }

  /** Classifies several texts; they share model runs (up to `batch_size` texts per run). */
  async classifyMany(texts: string[]): Promise<ClassifierResult[]> {
    if (this.status !== 'loaded') await this.load();
    const started = performance.now();
    const predictions = await Promise.all(texts.map((text) => this.batcher.submit(text)));
    const elapsed = performance.now() - started;
    return predictions.map((p) => this.result(p, elapsed));
  }

  async close(): Promise<void> {
    await this.loading?.catch(() => undefined);
    await this.release();
    this.loading = undefined;
    this.status = 'loading';
  }

  protected result(prediction: Prediction, elapsedMs: number): ClassifierResult {
    return {
      classifier: this.name,
      label: prediction.label,
      score: prediction.score,
      confidence: prediction.confidence,
      spans: [],
      latency_ms: Math.round(elapsedMs * 1000) / 1000,
      ...(prediction.detail ? { detail: prediction.detail } : {}),
    };
  }
}
