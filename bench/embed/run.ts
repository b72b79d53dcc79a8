/**
 * Embedding throughput of the `embedding-models` resource (the code path of POST /v1/embed:
 * tokenisation, prefix, batching, padding, a session worker, pooling, normalisation, arrays out)
 * versus a raw onnxruntime session on the main thread fed the same token ids as ready-made
 * tensors, on random-weight models generated with the exact shapes of
 *
 * - all-MiniLM-L6-v2 (AllMiniLML6V2: 6 layers, hidden 384, 12 heads, intermediate 1536, vocab 30522, mean pooling)
 * - bge-small-en-v1.5 (BGESmallENV15: 12 layers, hidden 384, 12 heads, intermediate 1536, vocab 30522, CLS pooling)
 *
 * Both sides: one intra-op thread, graph optimisation `all`. Measured one text per call
 * (batch 1) and 32 texts per call (one [32, T] run), the sides taking turns in short blocks so
 * load from other processes hits both alike; each round gives a ratio, the median round counts.
 * Then, with pool_size 2, two concurrent 32-text calls (the worker pool runs them in parallel)
 * against the raw session doing the same 64 texts one batch after the other. Last, the peak
 * resident memory of one 1,000-text request (vectors serialised as the stage does), in a fresh
 * process, above that process's resident memory with the model loaded.
 *
 *   npx tsx bench/embed/run.ts      (BENCH_DURATION seconds per side and round, default 2; BENCH_ROUNDS, default 3)
 *
 * Generated models are kept in $TMPDIR/switchyard-bench-embed (about 220 MB). Prints texts/s and
 * ratios (target ≥ 0.9); writes bench/results/embed-<timestamp>.json.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import * as ort from 'onnxruntime-node';
import type { EmbeddingModels } from '../../plugins/embed/api.ts';
import modelsResource from '../../plugins/embed/models-resource.ts';
import type { ResourceInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { bertBaseUncasedVocab } from '../../scripts/models/bert-vocab.ts';
import { SeededRandom } from '../../scripts/models/seeded-random.ts';
import { fmt, machine, mid, printTable, verdict, writeResults } from '../common/report.ts';
import { benchModelsDir, ensureModel } from './shapes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const durationMs = Number(process.env.BENCH_DURATION ?? 2) * 1000;
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const cacheDir = benchModelsDir;
const TARGET = 0.9;

const SHAPES = [
  { name: 'AllMiniLML6V2', label: 'all-MiniLM-L6-v2 shape', layers: 6 },
  { name: 'BGESmallENV15', label: 'bge-small-en-v1.5 shape', layers: 12 },
] as const;

/** Sentences of 12 to 48 words drawn from the vocabulary's whole words (fixed seed). */
function makeTexts(count: number, seed: number): string[] {
  const words = bertBaseUncasedVocab().filter((w) => /^[a-z]{3,}$/.test(w));
  const random = new SeededRandom(seed);
  return Array.from({ length: count }, () =>
    Array.from({ length: 12 + random.int(37) }, () => random.pick(words)).join(' '),
  );
}

interface Side {
  name: 'plugin' | 'raw';
  /** One call; resolves to the number of texts embedded. */
  call(): Promise<number>;
}

/** Texts/s of each side: `rounds` rounds of `durationMs` per side, taking turns in blocks of ~200 ms. */
async function measure(sides: Side[]): Promise<{ perSide: Record<string, number>; ratios: number[] }> {
  const perRound: Array<Record<string, number>> = [];
  for (let r = 0; r < rounds; r++) {
    const totals: Record<string, { texts: number; ms: number }> = {};
    for (const s of sides) totals[s.name] = { texts: 0, ms: 0 };
    while (sides.some((s) => totals[s.name].ms < durationMs)) {
      for (const side of r % 2 ? [...sides].reverse() : sides) {
        const t = totals[side.name];
        if (t.ms >= durationMs) continue;
        const start = performance.now();
        do t.texts += await side.call();
        while (performance.now() - start < 200);
        t.ms += performance.now() - start;
      }
    }
    perRound.push(Object.fromEntries(sides.map((s) => [s.name, (totals[s.name].texts / totals[s.name].ms) * 1000])));
  }
  const perSide = Object.fromEntries(sides.map((s) => [s.name, mid(perRound.map((p) => p[s.name])) ?? 0]));
  return { perSide, ratios: perRound.map((p) => p.plugin / p.raw) };
}

function rawFeeds(session: ort.InferenceSession, ids: number[][]): Record<string, ort.Tensor> {
  const length = Math.max(...ids.map((s) => s.length));
  const input = new BigInt64Array(ids.length * length);
  const mask = new BigInt64Array(ids.length * length);
  ids.forEach((s, b) => {
    s.forEach((id, t) => {
      input[b * length + t] = BigInt(id);
      mask[b * length + t] = 1n;
    });
  });
  const dims = [ids.length, length];
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', input, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
  };
  if (session.inputNames.includes('token_type_ids')) {
    feeds.token_type_ids = new ort.Tensor('int64', new BigInt64Array(input.length), dims);
  }
  return feeds;
}

async function openModels(poolSize: number): Promise<ResourceInstance<EmbeddingModels>> {
  return (await modelsResource.create(
    { models_dir: cacheDir, pool_size: poolSize, intra_op_threads: 1, batch_size: 32 } as never,
    createTestEnv(),
  )) as ResourceInstance<EmbeddingModels>;
}

async function peakMemory(models: EmbeddingModels, name: string): Promise<{ baseMb: number; peakMb: number }> {
  const texts = makeTexts(1000, 99);
  await models.embed(name, texts.slice(0, 32));
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 200));
  const base = process.memoryUsage.rss();
  let peak = base;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 5);
  const vectors = await models.embed(name, texts);
  const body = JSON.stringify(vectors);
  peak = Math.max(peak, process.memoryUsage.rss());
  clearInterval(timer);
  if (vectors.length !== 1000 || body.length === 0) throw new Error('1,000-text request went wrong');
  return { baseMb: base / 2 ** 20, peakMb: peak / 2 ** 20 };
}

async function main(): Promise<void> {
  for (const shape of SHAPES) ensureModel(shape.name);
  const texts = makeTexts(512, 1);
  const results: Record<string, unknown>[] = [];
  const rows: string[][] = [];

  for (const shape of SHAPES) {
    const dir = join(cacheDir, shape.name);
    const tokenizer = new Tokenizer(
      JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
      JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
    );
    const ids = texts.map((t) => tokenizer.encode(t).ids.slice(0, 512));
    const session = await ort.InferenceSession.create(join(dir, 'model.onnx'), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
    });
    const resource = await openModels(1);
    const models = resource.value;
    await models.embed(shape.name, texts.slice(0, 32));

    for (const batch of [1, 32]) {
      let next = 0;
      const pick = () => {
        const start = next;
        next = (next + batch) % (texts.length - batch);
        return start;
      };
      // Tensors for the raw side are built beforehand: it measures session.run alone.
      const feedsByStart = new Map<number, Record<string, ort.Tensor>>();
      const sides: Side[] = [
        {
          name: 'plugin',
          async call() {
            const start = pick();
            return (await models.embed(shape.name, texts.slice(start, start + batch))).length;
          },
        },
        {
          name: 'raw',
          async call() {
            const start = pick();
            let feeds = feedsByStart.get(start);
            if (!feeds) {
              feeds = rawFeeds(session, ids.slice(start, start + batch));
              feedsByStart.set(start, feeds);
            }
            await session.run(feeds);
            return batch;
          },
        },
      ];
      // Warm both sides on every start position once, so neither pays first-shape costs in the window.
      for (let i = 0; i < 3; i++) for (const s of sides) await s.call();
      const { perSide, ratios } = await measure(sides);
      const ratio = mid(ratios) ?? 0;
      rows.push([
        `${shape.label}, batch ${batch}`,
        fmt(perSide.raw),
        fmt(perSide.plugin),
        `${fmt(ratio, 3)}${verdict(ratio >= TARGET)}`,
        `${fmt(Math.min(...ratios), 3)}–${fmt(Math.max(...ratios), 3)}`,
      ]);
      results.push({
        model: shape.name,
        batch,
        raw_texts_per_s: perSide.raw,
        plugin_texts_per_s: perSide.plugin,
        ratio,
        ratios,
      });
    }
    await resource.close?.();

    // Two workers: two concurrent 32-text calls against the raw session doing both batches in turn.
    const pooled = await openModels(2);
    await Promise.all([
      pooled.value.embed(shape.name, texts.slice(0, 32)),
      pooled.value.embed(shape.name, texts.slice(32, 64)),
    ]);
    const feedsA = rawFeeds(session, ids.slice(0, 32));
    const feedsB = rawFeeds(session, ids.slice(32, 64));
    const parallel = await measure([
      {
        name: 'plugin',
        async call() {
          const runs = await Promise.all([
            pooled.value.embed(shape.name, texts.slice(0, 32)),
            pooled.value.embed(shape.name, texts.slice(32, 64)),
          ]);
          return runs[0].length + runs[1].length;
        },
      },
      {
        name: 'raw',
        async call() {
          await session.run(feedsA);
          await session.run(feedsB);
          return 64;
        },
      },
    ]);
    const parallelRatio = mid(parallel.ratios) ?? 0;
    rows.push([
      `${shape.label}, 2 × batch 32, pool_size 2`,
      fmt(parallel.perSide.raw),
      fmt(parallel.perSide.plugin),
      fmt(parallelRatio, 3),
      `${fmt(Math.min(...parallel.ratios), 3)}–${fmt(Math.max(...parallel.ratios), 3)}`,
    ]);
    results.push({ model: shape.name, batch: '2x32', pool_size: 2, ...parallel.perSide, ratio: parallelRatio });
    await pooled.close?.();
    await session.release();
  }

  console.log(
    `\nEmbedding throughput, texts/s (12–48 words per text; ${rounds} rounds of ${durationMs / 1000} s per side)\n`,
  );
  printTable(['', 'raw session', 'plugin', 'ratio', 'range'], rows);

  console.log(
    '\nPeak memory of one 1,000-text request (bge-small-en-v1.5 shape, pool_size 1, batch_size 32, fresh process)',
  );
  // A fresh process, so the figure is not inflated by what the throughput runs left allocated.
  const child = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--memory-child'], {
    encoding: 'utf8',
  });
  if (child.status !== 0) throw new Error(`memory run failed: ${child.stderr}`);
  const memory = JSON.parse(child.stdout.trim().split('\n').pop() ?? '{}') as { baseMb: number; peakMb: number };
  console.log(
    `  resident before: ${fmt(memory.baseMb)} MiB, peak during: ${fmt(memory.peakMb)} MiB, added: ${fmt(memory.peakMb - memory.baseMb)} MiB`,
  );

  writeResults(join(root, 'bench', 'results', `embed-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), {
    machine: machine(false),
    duration_ms: durationMs,
    rounds,
    throughput: results,
    memory_1000_texts: memory,
  });
}

if (process.argv.includes('--memory-child')) {
  const resource = await openModels(1);
  console.log(JSON.stringify(await peakMemory(resource.value, 'BGESmallENV15')));
  await resource.close?.();
} else {
  await main();
}
