/**
 * Tier B classifier throughput versus a raw onnxruntime session on the same inputs, in one run:
 *
 * - hf-sequence-classification: a generated tiny BERT (2 layers, hidden 128, 2 heads, like
 *   google/bert_uncased_L-2_H-128_A-2) on texts of about 64 tokens. The classifier gets text
 *   (tokenisation, padding, tensors, softmax and the result object are all inside its time);
 *   the raw session gets tensors built beforehand from the same token ids.
 * - linear-features: the shipped prompt-injection model; the raw session gets the precomputed
 *   feature vectors, the classifier computes them from text.
 *
 * A third line, "raw + preprocessing", is the raw session fed by the same tokenizer or feature
 * extractor called inline: the classifier against it shows the classifier's own overhead.
 * Measured one call at a time (batch 1) and with 8 texts per call (classifyMany versus one raw
 * run on an [8, T] batch). The three sides take turns in blocks of 10 calls, so a burst of load
 * from other processes hits all of them alike; each round gives a ratio, the median round counts
 * and the range is printed. A larger shape (4 layers, hidden 256) shows how the ratio moves with
 * model cost.
 *
 *   npx tsx bench/classify-ml/run.ts        (BENCH_DURATION seconds per side and round, default 1.5; BENCH_ROUNDS, default 3)
 *
 * Prints inferences per second and the ratio (target ≥ 0.9); writes bench/results/classify-ml-<timestamp>.json.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import * as ort from 'onnxruntime-node';
import pino from 'pino';
import { FeatureExtractor, parseFeatureScheme } from '../../plugins/classify/ml/features.ts';
import { createMlClassifier } from '../../plugins/classify/ml/index.ts';
import type { ModelClassifier } from '../../plugins/classify/ml/model-classifier.ts';
import { createSession, DEFAULT_INTRA_OP_THREADS } from '../../plugins/classify/ml/onnx-session.ts';
import { generateTinyBert } from '../../scripts/models/generate-tiny-bert.ts';
import { loadExamples } from '../../scripts/models/injection-dataset.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const durationMs = Number(process.env.BENCH_DURATION ?? 1.5) * 1000;
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const TARGET_TOKENS = 64;
const BATCH = 8;
const logger = pino({ level: 'warn' });

type SideName = 'classifier' | 'raw' | 'rawWithPreprocessing';
const SIDES: SideName[] = ['raw', 'rawWithPreprocessing', 'classifier'];
/** Calls per block: the sides take turns in short blocks so that load from other processes hits all of them alike. */
const BLOCK = 10;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Sides {
  classifier: () => Promise<unknown>;
  /** The session on inputs prepared beforehand. */
  raw: () => Promise<unknown>;
  /** The session with the same preprocessing done inline. */
  rawWithPreprocessing: () => Promise<unknown>;
}

/** Inferences per second of each side over one round (blocks of BLOCK calls in turn). */
async function round(sides: Sides, per: number): Promise<Record<SideName, number>> {
  const time = { classifier: 0, raw: 0, rawWithPreprocessing: 0 };
  let calls = 0;
  const end = performance.now() + durationMs * SIDES.length;
  while (performance.now() < end) {
    for (const side of SIDES) {
      const start = performance.now();
      for (let n = 0; n < BLOCK; n++) await sides[side]();
      time[side] += performance.now() - start;
    }
    calls += BLOCK;
  }
  const rate = (side: SideName) => (calls * per * 1000) / time[side];
  return { classifier: rate('classifier'), raw: rate('raw'), rawWithPreprocessing: rate('rawWithPreprocessing') };
}

/** BENCH_ROUNDS rounds; reports the median round's rates and the median and range of the ratios. */
async function compare(name: string, sides: Sides, per: number) {
  for (const side of SIDES) for (let n = 0; n < 20; n++) await sides[side]();
  const results: Record<SideName, number>[] = [];
  for (let r = 0; r < rounds; r++) results.push(await round(sides, per));
  const ratios = results.map((r) => r.classifier / r.raw);
  const own = results.map((r) => r.classifier / r.rawWithPreprocessing);
  const rate = (side: SideName) => Math.round(median(results.map((r) => r[side])));
  const round3 = (x: number) => Math.round(x * 1000) / 1000;
  const ratio = round3(median(ratios));
  const pad = (n: number) => String(n).padStart(6);
  console.log(
    `${name.padEnd(34)} classifier ${pad(rate('classifier'))}/s  raw ${pad(rate('raw'))}/s  raw+preprocessing ${pad(rate('rawWithPreprocessing'))}/s  ` +
      `ratio ${ratio.toFixed(3)} [${round3(Math.min(...ratios))}–${round3(Math.max(...ratios))}] ${ratio >= 0.9 ? 'PASS' : 'MISS'} (≥ 0.9)  ` +
      `vs raw+preprocessing ${round3(median(own)).toFixed(3)}`,
  );
  return {
    name,
    classifier_per_s: rate('classifier'),
    raw_per_s: rate('raw'),
    raw_with_preprocessing_per_s: rate('rawWithPreprocessing'),
    ratio_vs_raw: ratio,
    ratio_vs_raw_range: [round3(Math.min(...ratios)), round3(Math.max(...ratios))],
    ratio_vs_raw_with_preprocessing: round3(median(own)),
    per_inference_us: {
      classifier: Math.round(1e6 / rate('classifier')),
      raw: Math.round(1e6 / rate('raw')),
      raw_with_preprocessing: Math.round(1e6 / rate('rawWithPreprocessing')),
    },
  };
}

/** Texts of about TARGET_TOKENS tokens: data-set lines joined, then cut at a word boundary. */
function benchTexts(tokenizer: { encode(t: string): { ids: number[] } }, count: number): string[] {
  const lines = loadExamples().map((e) => e.text.replace(/\s+/g, ' '));
  const texts: string[] = [];
  for (let i = 0; texts.length < count; i++) {
    let words: string[] = [];
    for (let j = i; tokenizer.encode(words.join(' ')).ids.length < TARGET_TOKENS + 10; j++) {
      words = words.concat(lines[j % lines.length].split(' '));
    }
    while (tokenizer.encode(words.join(' ')).ids.length > TARGET_TOKENS) words.pop();
    texts.push(words.join(' '));
  }
  return texts;
}

function int64(values: number[]): BigInt64Array {
  return BigInt64Array.from(values.map(BigInt));
}

interface Shape {
  layers: number;
  hidden: number;
  heads: number;
}

async function benchHf(dir: string, shape: Shape, withBatch: boolean) {
  const name = `tiny-bert-${shape.layers}x${shape.hidden}`;
  generateTinyBert(join(dir, name), { ...shape, maxPositions: 512 });
  const classifier = createMlClassifier(
    { name, format: 'hf-sequence-classification', model: name, positive_labels: ['INJECTION'], batch_size: BATCH },
    { modelsDir: dir, logger },
  ) as ModelClassifier;
  await classifier.load();
  const tokenizer = new Tokenizer(
    JSON.parse(readFileSync(join(dir, name, 'tokenizer.json'), 'utf8')),
    JSON.parse(readFileSync(join(dir, name, 'tokenizer_config.json'), 'utf8')),
  );
  const texts = benchTexts(tokenizer, 64);
  const encoded = texts.map((t) => tokenizer.encode(t).ids);
  const session = await createSession(join(dir, name, 'model.onnx'));
  const feeds = (ids: number[][]) => {
    const length = Math.max(...ids.map((x) => x.length));
    const flat = ids.flatMap((x) => [...x, ...new Array(length - x.length).fill(0)]);
    const mask = ids.flatMap((x) => [...x.map(() => 1), ...new Array(length - x.length).fill(0)]);
    const dims = [ids.length, length];
    return {
      input_ids: new ort.Tensor('int64', int64(flat), dims),
      attention_mask: new ort.Tensor('int64', int64(mask), dims),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(flat.length), dims),
    };
  };
  const single = encoded.map((ids) => feeds([ids]));
  const batches = Array.from({ length: texts.length / BATCH }, (_, b) =>
    feeds(encoded.slice(b * BATCH, (b + 1) * BATCH)),
  );
  const textBatches = Array.from({ length: texts.length / BATCH }, (_, b) => texts.slice(b * BATCH, (b + 1) * BATCH));
  let i = 0;
  const tokens = median(encoded.map((x) => x.length));
  const label = `hf ${shape.layers}x${shape.hidden}, ${tokens} tokens`;
  const results = [
    await compare(
      `${label}, batch 1`,
      {
        classifier: () => classifier.classify(texts[i++ % texts.length]),
        raw: () => session.run(single[i++ % single.length]),
        rawWithPreprocessing: () => session.run(feeds([tokenizer.encode(texts[i++ % texts.length]).ids])),
      },
      1,
    ),
  ];
  if (withBatch) {
    results.push(
      await compare(
        `${label}, batch ${BATCH}`,
        {
          classifier: () => classifier.classifyMany(textBatches[i++ % textBatches.length]),
          raw: () => session.run(batches[i++ % batches.length]),
          rawWithPreprocessing: () =>
            session.run(feeds(textBatches[i++ % textBatches.length].map((t) => tokenizer.encode(t).ids))),
        },
        BATCH,
      ),
    );
  }
  await classifier.close?.();
  await session.release();
  return { model: { ...shape, tokens }, results };
}

async function benchLinear() {
  const modelDir = join(root, 'models', 'prompt-injection-linear');
  const classifier = createMlClassifier(
    {
      name: 'bench-linear',
      format: 'linear-features',
      model: 'prompt-injection-linear',
      positive_labels: ['injection'],
      batch_size: BATCH,
    },
    { modelsDir: join(root, 'models'), logger },
  ) as ModelClassifier;
  await classifier.load();
  const scheme = parseFeatureScheme(JSON.parse(readFileSync(join(modelDir, 'features.json'), 'utf8')));
  const extractor = new FeatureExtractor(scheme);
  const texts = loadExamples()
    .map((e) => e.text)
    .slice(0, 256);
  const features = (batch: string[]) => {
    const width = extractor.length;
    const data = new Float32Array(batch.length * width);
    batch.forEach((t, k) => {
      extractor.extract(t, data, k * width);
    });
    return { features: new ort.Tensor('float32', data, [batch.length, width]) };
  };
  const session = await createSession(join(modelDir, 'model.onnx'));
  const single = texts.map((t) => features([t]));
  const batches = Array.from({ length: texts.length / BATCH }, (_, b) =>
    features(texts.slice(b * BATCH, (b + 1) * BATCH)),
  );
  const textBatches = Array.from({ length: texts.length / BATCH }, (_, b) => texts.slice(b * BATCH, (b + 1) * BATCH));
  let i = 0;
  const results = [
    await compare(
      'linear-features, batch 1',
      {
        classifier: () => classifier.classify(texts[i++ % texts.length]),
        raw: () => session.run(single[i++ % single.length]),
        rawWithPreprocessing: () => session.run(features([texts[i++ % texts.length]])),
      },
      1,
    ),
    await compare(
      `linear-features, batch ${BATCH}`,
      {
        classifier: () => classifier.classifyMany(textBatches[i++ % textBatches.length]),
        raw: () => session.run(batches[i++ % batches.length]),
        rawWithPreprocessing: () => session.run(features(textBatches[i++ % textBatches.length])),
      },
      BATCH,
    ),
  ];
  await classifier.close?.();
  await session.release();
  return {
    texts: texts.length,
    mean_chars: Math.round(texts.reduce((s, t) => s + t.length, 0) / texts.length),
    results,
  };
}

const dir = mkdtempSync(join(tmpdir(), 'classify-ml-bench-'));
try {
  console.log(
    `classify-ml bench: ${cpus().length} CPUs, ${rounds} rounds of ${durationMs / 1000} s per side, median round, onnxruntime intra-op threads ${DEFAULT_INTRA_OP_THREADS}\n`,
  );
  const hf = [
    await benchHf(dir, { layers: 2, hidden: 128, heads: 2 }, true),
    await benchHf(dir, { layers: 4, hidden: 256, heads: 4 }, false),
  ];
  const linear = await benchLinear();
  const out = join(root, 'bench', 'results');
  mkdirSync(out, { recursive: true });
  const file = join(out, `classify-ml-${new Date().toISOString().replaceAll(':', '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ cpus: cpus().length, rounds, duration_ms: durationMs, hf, linear }, null, 2)}\n`,
  );
  console.log(`\nwrote ${file}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
