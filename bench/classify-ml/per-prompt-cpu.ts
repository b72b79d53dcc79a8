/**
 * CPU per prompt of the shipped default tenant's classifiers (issue 25's target: Tier A + the
 * shipped Tier B, p50 ≤ 150 µs), on the prompts of the injection corpus (test split: attacks,
 * ordinary prompts, hard negatives, as they come).
 *
 *   npx tsx bench/classify-ml/per-prompt-cpu.ts [--split test|val|train|all] [--rounds 3]
 *
 * Per prompt, the process's CPU time (process.cpuUsage: user + system, all threads) around one
 * call, for:
 * - `tier-a`: the `dev` tenant's pattern classifiers (pii, secrets, prompt_injection), synchronously;
 * - `tier-b`: the shipped `injection_model` (linear-features) through the classifier API, as served
 *   (a sparse dot product, no onnxruntime session: plugins/classify/ml/onnx-linear.ts);
 * - `tier-a + tier-b`: `ClassifierSet.classify` with the `dev` tenant's classifiers, as a request
 *   does;
 * - `tier-b via onnxruntime`: the same model as it ran before, the dense feature vector of
 *   features.ts fed to an onnxruntime session (batch 1), for comparison.
 * Prints p50, p90, p99 and the mean per side (µs), the median of `--rounds` rounds (the sides take
 * turns, so load from other processes hits them alike); writes bench/results/per-prompt-cpu-<time>.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { FeatureExtractor, parseFeatureScheme } from '../../plugins/classify/ml/features.ts';
import { createSession } from '../../plugins/classify/ml/onnx-session.ts';
import { loadCorpus } from '../../scripts/models/injection-corpus.ts';
import { shippedFilter } from '../detect/injection.ts';
import { percentile } from '../detect/lib/metrics.ts';

const ROOT = resolve(import.meta.dirname, '../..');

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { split: { type: 'string', default: 'test' }, rounds: { type: 'string', default: '3' } },
  });
  const corpus = loadCorpus().filter((e) => values.split === 'all' || e.split === values.split);
  const texts = corpus.map((e) => e.text);
  const filter = await shippedFilter();
  const dev = filter.tenants.find((t) => t.id === 'dev');
  const model = filter.entries.find((e) => e.type === 'ml' && e.format === 'linear-features');
  if (!dev?.classifiers || !model) throw new Error('the dev tenant and a linear-features model must be shipped');
  if (!dev.classifiers.includes(model.name)) console.warn(`note: the dev tenant does not run ${model.name}`);
  const tierA = dev.classifiers.filter((n) => filter.set.get(n)?.classifySync);
  const tierB = filter.set.get(model.name);
  if (!tierB) throw new Error(`${model.name} is not in the set`);
  await tierB.load();

  const dir = join(ROOT, 'models', String(model.model));
  const extractor = new FeatureExtractor(
    parseFeatureScheme(JSON.parse(readFileSync(join(dir, 'features.json'), 'utf8'))),
  );
  const session = await createSession(join(dir, 'model.onnx'));
  const vector = new Float32Array(extractor.length);

  const sides: Record<string, (text: string) => Promise<unknown> | unknown> = {
    'tier-a': (text) => tierA.map((n) => filter.set.get(n)?.classifySync?.(text)),
    'tier-b': (text) => tierB.classify(text),
    'tier-a + tier-b': (text) => filter.set.classify(dev.classifiers, text),
    'tier-b via onnxruntime': async (text) => {
      extractor.extract(text, vector);
      const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', vector, [1, vector.length]) };
      return session.run(feeds);
    },
  };
  const rounds = Number(values.rounds);
  const results: Record<string, Array<{ p50: number; p90: number; p99: number; mean: number }>> = {};
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of Object.entries(sides)) {
      for (const t of texts.slice(0, 100)) await run(t); // warm-up: JIT, caches
      const us: number[] = [];
      for (const t of texts) {
        const before = process.cpuUsage();
        await run(t);
        const used = process.cpuUsage(before);
        us.push(used.user + used.system);
      }
      results[name] ??= [];
      results[name].push({
        p50: percentile(us, 50),
        p90: percentile(us, 90),
        p99: percentile(us, 99),
        mean: us.reduce((a, b) => a + b, 0) / us.length,
      });
    }
  }
  await session.release();
  await filter.close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `${texts.length} prompts (split ${values.split}), ${rounds} rounds; CPU µs per prompt (median of rounds)`,
  );
  console.log(`${'side'.padEnd(24)}${['p50', 'p90', 'p99', 'mean'].map((h) => h.padStart(8)).join('')}`);
  const summary: Record<string, Record<string, number>> = {};
  for (const [name, rs] of Object.entries(results)) {
    summary[name] = Object.fromEntries(
      (['p50', 'p90', 'p99', 'mean'] as const).map((k) => [k, median(rs.map((r) => r[k]))]),
    );
    console.log(
      `${name.padEnd(24)}${Object.values(summary[name])
        .map((v) => v.toFixed(0).padStart(8))
        .join('')}`,
    );
  }
  const out = join(ROOT, 'bench/results', `per-prompt-cpu-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(
    out,
    `${JSON.stringify({ split: values.split, prompts: texts.length, rounds, summary, results }, null, 2)}\n`,
  );
  console.log(`results: ${out}`);
}

await main();
