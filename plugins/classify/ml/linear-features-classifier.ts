/**
 * `format: linear-features` — an ONNX model over a documented feature vector computed in
 * TypeScript (features.ts), such as the prompt-injection model this repository trains
 * (scripts/models/train-injection.ts). Directory: model.onnx (input float [batch, dimension],
 * output class probabilities [batch, labels]), features.json (the scheme's parameters) and
 * labels.json (class names in output order).
 *
 * When model.onnx is one linear layer and a softmax (onnx-linear.ts: what train-injection.ts
 * exports), no onnxruntime session is made: the logits are a sparse dot product of the text's
 * hashed features with W (FeatureExtractor.dot), which costs a few µs where a session run over a
 * dense 32 775-wide vector cost ~200 µs per text. Any other graph runs in onnxruntime.
 * A text longer than 16 KiB is scored in a worker thread (../long-text-worker.ts): its features grow
 * with it (~0.14 ms per KiB) and must not hold the event loop; the same code, the same score.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { ClassifierResult } from '../api.ts';
import { LongTextWorker } from '../long-text-worker.ts';
import { FeatureExtractor, parseFeatureScheme } from './features.ts';
import type { LinearWorkerData } from './linear-worker.ts';
import { ModelClassifier } from './model-classifier.ts';
import { modelDirectory, readJson, requireFile } from './model-files.ts';
import { type LinearLayer, readLinearLayer } from './onnx-linear.ts';
import { createSession, loadOrt, type Ort } from './onnx-session.ts';
import { labelIndices, type Prediction, predictionFromProbabilities, softmaxRow } from './probabilities.ts';

const LINEAR_WORKER = new URL('./linear-worker.ts', import.meta.url);

export interface LinearFeaturesOptions {
  model: string;
  positiveLabels?: string[];
  threshold: number;
  batchSize: number;
  intraOpThreads?: number;
}

export class LinearFeaturesClassifier extends ModelClassifier {
  private session: Ort.InferenceSession | undefined;
  /** The model's weights when it is a plain linear layer (then no session). */
  private layer: LinearLayer | undefined;
  private logits = new Float64Array(0);
  /** The runtime's module, once a session is loaded (tensors are made with it). */
  private ort: typeof Ort | undefined;
  private extractor: FeatureExtractor | undefined;
  private labels: string[] = [];
  private positive: Set<number> | null = null;
  private inputName = '';
  private outputName = '';
  /** Reused between a session's runs (they never overlap, see Batcher). */
  private buffer = new Float32Array(0);
  /** Long texts' scoring off the event loop, when the model is a linear layer. */
  longTexts: LongTextWorker<Float64Array> | undefined;

  constructor(
    name: string,
    private readonly options: LinearFeaturesOptions,
    private readonly modelsDir: string,
    logger: Logger,
  ) {
    super(name, options.model, logger, options.batchSize);
  }

  protected async open(): Promise<void> {
    const dir = modelDirectory(this.modelsDir, this.options.model);
    const modelFile = requireFile(dir, ['model.onnx'], 'ONNX model');
    const scheme = parseFeatureScheme(readJson(requireFile(dir, ['features.json'], 'feature scheme')));
    const labelsFile = requireFile(dir, ['labels.json'], 'label list');
    const labels = readJson(labelsFile);
    if (!Array.isArray(labels) || labels.length < 2 || !labels.every((l) => typeof l === 'string')) {
      throw new Error(`${labelsFile}: expected an array of at least two label names`);
    }
    this.labels = labels;
    this.positive = labelIndices(this.options.positiveLabels, labels, `model "${this.options.model}"`);
    this.extractor = new FeatureExtractor(scheme);
    const layer = readLinearLayer(readFileSync(modelFile));
    if (layer) {
      if (layer.width !== this.extractor.length || layer.classes !== labels.length) {
        throw new Error(
          `${modelFile}: a linear layer [${layer.width}, ${layer.classes}], expected [${this.extractor.length}, ${labels.length}] (features.json, labels.json)`,
        );
      }
      this.layer = layer;
      this.logits = new Float64Array(layer.classes);
      const data: LinearWorkerData = { scheme, weights: layer.weights, bias: layer.bias, classes: layer.classes };
      this.longTexts = new LongTextWorker(LINEAR_WORKER, data, 'model');
      return;
    }
    const session = await createSession(modelFile, this.options.intraOpThreads);
    this.ort = await loadOrt();
    this.inputName = session.inputNames[0];
    this.outputName = session.outputNames.includes('probabilities') ? 'probabilities' : session.outputNames[0];
    this.session = session;
  }

  /** A linear layer's prediction: bias + sparse dot product, softmax. */
  private predictLinear(layer: LinearLayer, extractor: FeatureExtractor, text: string): Prediction {
    const logits = this.logits;
    logits.set(layer.bias);
    extractor.dot(text, layer.weights, layer.classes, logits);
    return this.fromLogits(logits, layer.classes);
  }

  private fromLogits(logits: Float64Array, classes: number): Prediction {
    return predictionFromProbabilities(
      softmaxRow(logits, 0, classes),
      this.labels,
      this.positive,
      this.options.threshold,
    );
  }

  /**
   * A session's texts go through the batcher (they share runs). A linear layer scores each text on
   * its own: a long one in the worker (it would hold the event loop), a short one at once (its
   * sparse dot product is synchronous: no run to share, no batch to wait for, and no frame of its
   * own: it is on every request's way).
   */
  override classify(text: string): Promise<ClassifierResult> {
    if (!this.loaded) return this.load().then(() => this.classify(text));
    const { layer, extractor, longTexts } = this;
    if (!layer || !extractor) return super.classify(text);
    if (longTexts && text.length > longTexts.limits.chars) {
      const started = performance.now();
      return longTexts
        .run(text)
        .then((logits) => this.result(this.fromLogits(logits, logits.length), performance.now() - started));
    }
    const started = performance.now();
    try {
      return Promise.resolve(this.result(this.predictLinear(layer, extractor, text), performance.now() - started));
    } catch (err) {
      // A throw is a rejection, as from any classify().
      return Promise.reject(err);
    }
  }

  override classifyMany(texts: string[]): Promise<ClassifierResult[]> {
    if (!this.loaded) return this.load().then(() => this.classifyMany(texts));
    return this.layer ? Promise.all(texts.map((t) => this.classify(t))) : super.classifyMany(texts);
  }

  protected async predict(texts: string[]): Promise<Prediction[]> {
    // A session's batch only: a linear layer scores in classify().
    const { session, extractor } = this;
    if (!session || !extractor) throw new Error('classifier is closed');
    const dimension = extractor.length;
    const size = texts.length * dimension;
    if (this.buffer.length < size) this.buffer = new Float32Array(size);
    const features = this.buffer.subarray(0, size);
    texts.forEach((text, i) => {
      extractor.extract(text, features, i * dimension);
    });
    const feeds = {
      [this.inputName]: new (this.ort as typeof Ort).Tensor('float32', features, [texts.length, dimension]),
    };
    const output = (await session.run(feeds, [this.outputName]))[this.outputName];
    if (output.dims.length !== 2 || output.dims[1] !== this.labels.length) {
      throw new Error(
        `model output ${this.outputName} has shape [${output.dims}], expected [${texts.length}, ${this.labels.length}]`,
      );
    }
    const probs = output.data as Float32Array;
    const width = this.labels.length;
    return texts.map((_, row) =>
      predictionFromProbabilities(
        Array.from(probs.subarray(row * width, (row + 1) * width)),
        this.labels,
        this.positive,
        this.options.threshold,
      ),
    );
  }

  protected override async release(): Promise<void> {
    await this.longTexts?.close();
    this.longTexts = undefined;
    await this.session?.release();
    this.session = undefined;
    this.layer = undefined;
  }
}
