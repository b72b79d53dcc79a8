/**
 * `npx tsx bench/classify-ml/tenant-classifiers.ts`: CPU of each classifier of the shipped `dev`
 * tenant (configs/safety-filter.yaml) on the chat text `npm run bench` sends (its user message,
 * what the filter classifies; bench/services/cases.ts) and on a 1.9 KB prompt (the ablation's and
 * profile-filter.ts's): µs per call, one classifier at a time, in this process. The Tier B model
 * is timed without its batcher: its features and the dot product, as its classifier runs them.
 *
 * BENCH_BASELINE=<another checkout>: the model's work of that checkout's compiled
 * dist/plugins/classify/ml/features.js against this one's (both built: npm run build; compiled
 * alike, as the service runs, not one through tsx), paired: blocks of 50 calls of each in
 * turn, the ratio of each pair of neighbouring blocks, their median and quartiles (a machine whose
 * speed drifts within seconds moves both sides of a pair alike). The logits must be equal.
 *
 * Env: BENCH_ROUNDS (7 rounds of BENCH_CALLS, 2000, per classifier; the median is printed),
 * BENCH_PAIRS (300).
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as features from '../../plugins/classify/ml/features.ts';
import { readLinearLayer } from '../../plugins/classify/ml/onnx-linear.ts';
import { shippedFilter } from '../detect/injection.ts';
import { chatRequest } from '../services/cases.ts';

const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const calls = Number(process.env.BENCH_CALLS ?? 2000);
const pairs = Number(process.env.BENCH_PAIRS ?? 300);
const chat = JSON.parse(chatRequest(false)) as { messages: Array<{ role: string; content: string }> };
const texts: Record<string, string> = {
  'bench chat, user message': chat.messages.find((m) => m.role === 'user')?.content ?? '',
  '1.9 KB prompt': 'Please summarise the notes from our weekly planning meeting for the team. '.repeat(25),
};

type Features = Pick<typeof features, 'FeatureExtractor' | 'parseFeatureScheme'>;
const modelDir = join(import.meta.dirname, '../../models/prompt-injection-linear');
const layer = readLinearLayer(readFileSync(join(modelDir, 'model.onnx')));
if (!layer) throw new Error('the shipped model is not a linear layer');
const schemeJson = JSON.parse(readFileSync(join(modelDir, 'features.json'), 'utf8'));

/** The model's logits of a text through one implementation of the feature scheme. */
function modelOf(impl: Features): (text: string) => Float64Array {
  const extractor = new impl.FeatureExtractor(impl.parseFeatureScheme(schemeJson));
  const logits = new Float64Array(layer?.classes ?? 2);
  return (text) => {
    if (!layer) return logits;
    logits.set(layer.bias);
    extractor.dot(text, layer.weights, layer.classes, logits);
    return logits;
  };
}

const perCall = (run: () => void, n: number): number => {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) run();
  return Number(process.hrtime.bigint() - t) / n / 1000;
};
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const median = (xs: number[]) => sorted(xs)[xs.length >> 1];

function measure(name: string, run: () => void): void {
  const perRound = sorted(Array.from({ length: rounds }, () => perCall(run, calls)));
  const [least, mid, most] = [perRound[0], median(perRound), perRound[rounds - 1]];
  console.log(`  ${name.padEnd(24)} ${mid.toFixed(2).padStart(8)}  (${least.toFixed(2)}–${most.toFixed(2)})`);
}

const { set, tenants, close } = await shippedFilter();
const names = tenants.find((t) => t.id === 'dev')?.classifiers ?? [];
const model = modelOf(features);
for (const [label, text] of Object.entries(texts)) {
  console.log(`${label} (${text.length} chars), µs per call, median of ${rounds} rounds (least–greatest):`);
  for (const name of names) {
    const c = set.get(name);
    if (c?.classifySync) measure(name, () => c.classifySync?.(text));
  }
  measure('injection model (dot)', () => model(text));
}
await close();

const baseline = process.env.BENCH_BASELINE;
if (baseline) {
  const compiled = async (checkout: string) =>
    modelOf((await import(pathToFileURL(join(checkout, 'dist/plugins/classify/ml/features.js')).href)) as Features);
  const file = join(resolve(baseline), 'dist/plugins/classify/ml/features.js');
  const base = await compiled(resolve(baseline));
  const built = await compiled(join(import.meta.dirname, '../..'));
  console.log(`\nthe model's work, this checkout against ${file}, ${pairs} pairs of 50-call blocks:`);
  for (const [label, text] of Object.entries(texts)) {
    const [ours, theirs] = [built(text).join(), base(text).join()];
    if (ours !== theirs) throw new Error(`${label}: logits ${ours} here, ${theirs} in the baseline`);
    for (let i = 0; i < 1000; i++) {
      built(text);
      base(text);
    }
    const ratios: number[] = [];
    const [here, there]: number[][] = [[], []];
    const ourBlock = () => perCall(() => built(text), 50);
    const theirBlock = () => perCall(() => base(text), 50);
    for (let k = 0; k < pairs; k++) {
      // Each side first in every other pair.
      let ours: number;
      let theirs: number;
      if (k % 2) {
        ours = ourBlock();
        theirs = theirBlock();
      } else {
        theirs = theirBlock();
        ours = ourBlock();
      }
      here.push(ours);
      there.push(theirs);
      ratios.push(ours / theirs);
    }
    const r = sorted(ratios);
    console.log(
      `  ${label.padEnd(26)} ${median(here).toFixed(2)} vs ${median(there).toFixed(2)} µs; paired ratio ${median(ratios).toFixed(3)} (quartiles ${r[Math.floor(pairs / 4)].toFixed(3)}–${r[Math.floor((3 * pairs) / 4)].toFixed(3)})`,
    );
  }
}
