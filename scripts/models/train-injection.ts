/**
 * Trains the prompt-injection classifier shipped in models/prompt-injection-linear/:
 * logistic regression over the hashed n-gram features of plugins/classify/ml/features.ts,
 * on the data set in data/prompt-injection/ (see injection-dataset.ts for the split).
 *
 *   npx tsx scripts/models/train-injection.ts [--out models/prompt-injection-linear]
 *
 * The L2 strength is chosen by 5-fold group cross-validation on the training split only; the
 * model is then fitted on the training split and evaluated once on the held-out split. The
 * shipped model is that model (not refitted on all data), so metrics.json describes it exactly.
 * Export: ONNX opset 13, features [batch, D] → MatMul → Add → Softmax → probabilities [batch, 2].
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultFeatureScheme, FeatureExtractor, type FeatureScheme } from '../../plugins/classify/ml/features.ts';
import { type Example, LABELS, loadExamples, SPLIT_SEED, splitExamples, TEST_FRACTION } from './injection-dataset.ts';
import { FLOAT, GraphBuilder } from './onnx-graph.ts';
import { SeededRandom } from './seeded-random.ts';

const LAMBDAS = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3];
const ITERATIONS = 600;
const THRESHOLD = 0.5;

interface Sparse {
  index: Int32Array;
  value: Float32Array;
}

interface Model {
  weights: Float64Array;
  bias: number;
}

function toSparse(dense: Float32Array): Sparse {
  const index: number[] = [];
  const value: number[] = [];
  dense.forEach((v, i) => {
    if (v !== 0) {
      index.push(i);
      value.push(v);
    }
  });
  return { index: Int32Array.from(index), value: Float32Array.from(value) };
}

function margin(model: Model, x: Sparse): number {
  let z = model.bias;
  for (let k = 0; k < x.index.length; k++) z += model.weights[x.index[k]] * x.value[k];
  return z;
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/**
 * Class-balanced, L2-regularised logistic regression by Nesterov-accelerated gradient descent.
 * Feature vectors have unit norm, so the loss gradient is 1/4-Lipschitz and the step 1/(1/4 + λ) is safe.
 */
function trainLogistic(xs: Sparse[], ys: number[], dimension: number, lambda: number): Model {
  const positives = ys.reduce((a, b) => a + b, 0);
  const classWeight = [ys.length / (2 * (ys.length - positives)), ys.length / (2 * positives)];
  const step = 1 / (0.25 * Math.max(...classWeight) + lambda);
  const w = new Float64Array(dimension);
  let b = 0;
  const prevW = new Float64Array(dimension);
  let prevB = 0;
  const look: Model = { weights: new Float64Array(dimension), bias: 0 };
  const grad = new Float64Array(dimension);
  for (let t = 1; t <= ITERATIONS; t++) {
    const momentum = (t - 1) / (t + 2);
    for (let i = 0; i < dimension; i++) look.weights[i] = w[i] + momentum * (w[i] - prevW[i]);
    look.bias = b + momentum * (b - prevB);
    grad.fill(0);
    let gradB = 0;
    xs.forEach((x, n) => {
      const err = (classWeight[ys[n]] * (sigmoid(margin(look, x)) - ys[n])) / xs.length;
      for (let k = 0; k < x.index.length; k++) grad[x.index[k]] += err * x.value[k];
      gradB += err;
    });
    prevW.set(w);
    prevB = b;
    for (let i = 0; i < dimension; i++) w[i] = look.weights[i] - step * (grad[i] + lambda * look.weights[i]);
    b = look.bias - step * gradB;
  }
  return { weights: w, bias: b };
}

interface Metrics {
  examples: number;
  positives: number;
  precision: number;
  recall: number;
  f1: number;
  accuracy: number;
  confusion: { tp: number; fp: number; tn: number; fn: number };
}

function evaluate(scores: number[], ys: number[]): Metrics {
  const c = { tp: 0, fp: 0, tn: 0, fn: 0 };
  scores.forEach((s, i) => {
    const predicted = s >= THRESHOLD ? 1 : 0;
    if (predicted === 1) c[ys[i] === 1 ? 'tp' : 'fp']++;
    else c[ys[i] === 0 ? 'tn' : 'fn']++;
  });
  const precision = c.tp / Math.max(1, c.tp + c.fp);
  const recall = c.tp / Math.max(1, c.tp + c.fn);
  const round = (v: number) => Math.round(v * 1000) / 1000;
  return {
    examples: ys.length,
    positives: c.tp + c.fn,
    precision: round(precision),
    recall: round(recall),
    f1: round(precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall)),
    accuracy: round((c.tp + c.tn) / ys.length),
    confusion: c,
  };
}

/** 5-fold cross-validation over groups of the training split; returns the λ with the best F1. */
function chooseLambda(
  train: Example[],
  xs: Sparse[],
  ys: number[],
  dimension: number,
): { lambda: number; cv: Record<string, number> } {
  const groups = [...new Set(train.map((e) => e.group))];
  new SeededRandom(SPLIT_SEED + 1).shuffle(groups);
  const fold = new Map(groups.map((g, i) => [g, i % 5]));
  const cv: Record<string, number> = {};
  for (const lambda of LAMBDAS) {
    const scores: number[] = [];
    const truth: number[] = [];
    for (let f = 0; f < 5; f++) {
      const inFold = train.map((e) => fold.get(e.group) === f);
      const model = trainLogistic(
        xs.filter((_, i) => !inFold[i]),
        ys.filter((_, i) => !inFold[i]),
        dimension,
        lambda,
      );
      xs.forEach((x, i) => {
        if (inFold[i]) {
          scores.push(sigmoid(margin(model, x)));
          truth.push(ys[i]);
        }
      });
    }
    cv[String(lambda)] = evaluate(scores, truth).f1;
  }
  const lambda = LAMBDAS.reduce((best, l) => (cv[String(l)] > cv[String(best)] ? l : best), LAMBDAS[0]);
  return { lambda, cv };
}

/** Two-class softmax equal to sigmoid(w·x + b) for the `injection` class. */
function exportOnnx(model: Model, dimension: number): Uint8Array {
  const weights = new Float32Array(dimension * 2);
  for (let i = 0; i < dimension; i++) {
    weights[i * 2] = -model.weights[i] / 2;
    weights[i * 2 + 1] = model.weights[i] / 2;
  }
  const g = new GraphBuilder('prompt-injection-linear');
  const input = g.input('features', FLOAT, ['batch', dimension]);
  const logits = g.node('Add', [
    g.node('MatMul', [input, g.initializer('weights', [dimension, 2], weights)]),
    g.initializer('bias', [2], Float32Array.of(-model.bias / 2, model.bias / 2)),
  ]);
  g.node('Softmax', [logits], { axis: 1 }, 'probabilities');
  g.output('probabilities', FLOAT, ['batch', 2]);
  return g.toBytes(13, 'Prompt-injection classifier: logistic regression over hashed n-grams (see docs/models.md).');
}

function main(): void {
  const { values } = parseArgs({ options: { out: { type: 'string', default: 'models/prompt-injection-linear' } } });
  const outDir = resolve(values.out ?? '');
  const scheme: FeatureScheme = defaultFeatureScheme;
  const extractor = new FeatureExtractor(scheme);
  const featurize = (e: Example) => {
    const dense = new Float32Array(scheme.dimension);
    extractor.extract(e.text, dense);
    return toSparse(dense);
  };
  const label = (e: Example) => LABELS.indexOf(e.label);

  const examples = loadExamples();
  const { train: trainSet, test: testSet } = splitExamples(examples);
  const xs = trainSet.map(featurize);
  const ys = trainSet.map(label);
  const started = performance.now();
  const { lambda, cv } = chooseLambda(trainSet, xs, ys, scheme.dimension);
  const model = trainLogistic(xs, ys, scheme.dimension, lambda);

  const testScores = testSet.map((e) => sigmoid(margin(model, featurize(e))));
  const testLabels = testSet.map(label);
  const subset = (source: Example['source']) => {
    const idx = testSet.flatMap((e, i) => (e.source === source ? [i] : []));
    return evaluate(
      idx.map((i) => testScores[i]),
      idx.map((i) => testLabels[i]),
    );
  };
  const count = (set: Example[], l: string, s?: string) =>
    set.filter((e) => e.label === l && (!s || e.source === s)).length;
  const errors = testSet
    .map((e, i) => ({ text: e.text, label: e.label, score: Math.round(testScores[i] * 1000) / 1000 }))
    .filter((e, i) => (e.score >= THRESHOLD ? 1 : 0) !== testLabels[i]);

  const metrics = {
    model: 'logistic regression (L2, class-balanced) over hashed word 1-2-grams and char 3-5-grams',
    data: {
      description:
        'Hand-written for this repository plus templated expansions; English with a few French, German, Spanish, Italian, Portuguese, Japanese and Chinese lines. Small: not a benchmark.',
      total: examples.length,
      train: { benign: count(trainSet, 'benign'), injection: count(trainSet, 'injection') },
      test: {
        benign: count(testSet, 'benign'),
        injection: count(testSet, 'injection'),
        handwritten: count(testSet, 'benign', 'handwritten') + count(testSet, 'injection', 'handwritten'),
        template: count(testSet, 'benign', 'template') + count(testSet, 'injection', 'template'),
      },
      split: { by: 'group (hand-written line or template)', test_fraction: TEST_FRACTION, seed: SPLIT_SEED },
    },
    threshold: THRESHOLD,
    positive_label: 'injection',
    lambda,
    cross_validation_f1: cv,
    heldout: evaluate(testScores, testLabels),
    heldout_handwritten: subset('handwritten'),
    heldout_template: subset('template'),
    heldout_errors: errors,
  };

  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'model.onnx'), exportOnnx(model, scheme.dimension));
  writeFileSync(join(outDir, 'features.json'), `${JSON.stringify(scheme, null, 2)}\n`);
  writeFileSync(join(outDir, 'labels.json'), `${JSON.stringify(LABELS)}\n`);
  writeFileSync(join(outDir, 'metrics.json'), `${JSON.stringify(metrics, null, 2)}\n`);
  const h = metrics.heldout;
  console.log(
    `trained in ${Math.round(performance.now() - started)} ms, λ=${lambda}; held-out (${h.examples} examples, ${h.positives} injections): ` +
      `precision ${h.precision}, recall ${h.recall}, F1 ${h.f1}; wrote ${outDir}`,
  );
}

main();
