/**
 * PII detection measured on the synthetic set of pii-generate.ts: per type precision, recall and
 * F1, recall per phone locale and style, the share of hard negatives flagged (per kind), and CPU
 * µs per item.
 *
 *   npx tsx bench/detect/pii.ts
 *   PII_BASELINE=/path/to/other/plugins/classify/patterns/classifier.ts npx tsx bench/detect/pii.ts
 *   PII_METADATA=1 npx tsx bench/detect/pii.ts     # the phone detector with each metadata set
 *
 * A gold span counts as found when predicted spans of its label cover at least half of it; a
 * predicted span is right when it overlaps a gold span of its label. `PII_SEED` (default 25)
 * picks the set; `PII_JSON=<file>` writes the figures as JSON.
 */
import { writeFileSync } from 'node:fs';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import maxMetadata from 'libphonenumber-js/max/metadata';
import minMetadata from 'libphonenumber-js/min/metadata';
import mobileMetadata from 'libphonenumber-js/mobile/metadata';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { TextView } from '../../plugins/classify/patterns/detector.ts';
import { DEFAULT_PHONE_REGIONS, phoneDetector } from '../../plugins/classify/patterns/phone.ts';
import { fmt, printTable } from '../common/report.ts';
import { cpuPerItem } from './lib/cpu.ts';
import { generatePiiSet, PHONE_LOCALES } from './pii-generate.ts';
import { evaluate, type Predict, type Scores } from './pii-score.ts';

const seed = Number(process.env.PII_SEED ?? 25);
const items = generatePiiSet({ seed });
const positives = items.filter((i) => i.kind === 'positive');
const negatives = items.filter((i) => i.kind === 'hard_negative');
console.log(
  `PII set (seed ${seed}): ${positives.length} sentences with ${positives.reduce((n, i) => n + i.spans.length, 0)} values, ${negatives.length} hard negatives`,
);

type ClassifierLike = { classifySync(text: string): { spans: Array<{ start: number; end: number; label: string }> } };
const asPredict =
  (c: ClassifierLike): Predict =>
  (text) =>
    c.classifySync(text).spans;

/** Is a generated phone value a number libphonenumber (max metadata) calls valid, for its locale's region? */
function validPhone(value: string, locale: string): boolean {
  const region = PHONE_LOCALES[locale] as Parameters<typeof parsePhoneNumberFromString>[1];
  const n = parsePhoneNumberFromString(value, region);
  return n?.isValid() ?? false;
}

function report(name: string, s: Scores): void {
  console.log(`\n== ${name}`);
  printTable(
    ['type', 'gold', 'found', 'recall', 'predicted', 'precision', 'F1'],
    Object.entries(s.types).map(([type, t]) => [
      type,
      String(t.gold),
      String(t.found),
      fmt(t.recall, 3),
      String(t.predicted),
      fmt(t.precision, 3),
      fmt(t.f1, 3),
    ]),
  );
  console.log(
    `hard negatives flagged: ${s.negativesFlagged}/${negatives.length} = ${fmt(100 * s.negativeRate, 2)}% (target ≤ 0.5%)`,
  );
  const kinds = Object.entries(s.negativesByGroup).filter(([, n]) => n.flagged > 0);
  if (kinds.length > 0) console.log(`  by kind: ${kinds.map(([k, n]) => `${k} ${n.flagged}/${n.total}`).join(', ')}`);
  for (const ex of s.negativeExamples.slice(0, 8)) console.log(`  e.g. ${JSON.stringify(ex)}`);
}

function phoneDetail(s: Scores): void {
  const rows = Object.entries(s.groups)
    .filter(([g]) => g.startsWith('phone:'))
    .map(([g, r]) => [g.slice(6), String(r.gold), fmt(r.recall, 3), fmt(r.validRecall, 3), String(r.validGold)]);
  console.log('\nphone recall by locale and faker style (valid: the values libphonenumber calls valid):');
  printTable(['locale:style', 'gold', 'recall', 'recall valid', 'valid'], rows);
  console.log(`phone recall on valid values: ${fmt(s.phoneValidRecall, 3)} (${s.phoneValidGold} values)`);
  for (const ex of s.missedPhones.slice(0, 15)) console.log(`  missed ${JSON.stringify(ex)}`);
}

const timed = [1, 2, 3].map((k) => generatePiiSet({ seed: seed + 1000 * k }));

const results: Record<string, unknown> = {};
const pii = new PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] });
const current = evaluate(items, asPredict(pii), validPhone);
report('this tree: detectors [pii]', current);
phoneDetail(current);
results.current = current;

const tierA = new PatternClassifier({
  name: 'all',
  type: 'pattern',
  detectors: ['pii', 'secrets', 'prompt_injection', 'jailbreak', 'hidden_text'],
});
const cpuPii = cpuPerItem(asPredict(pii), items, timed);
const cpuAll = cpuPerItem(asPredict(tierA), items, timed);
console.log(
  `\nCPU µs per item (its first call, ${timed.reduce((n, t) => n + t.length, 0)} items of 3 other seeds): pii p50 ${fmt(cpuPii.p50)} mean ${fmt(cpuPii.mean)} p99 ${fmt(cpuPii.p99)}; ` +
    `all Tier A detectors p50 ${fmt(cpuAll.p50)} mean ${fmt(cpuAll.mean)} p99 ${fmt(cpuAll.p99)} (target p50 ≤ 150)`,
);
results.cpu = { pii: cpuPii, all_tier_a: cpuAll };

if (process.env.PII_BASELINE) {
  const mod = (await import(process.env.PII_BASELINE)) as { PatternClassifier: new (spec: unknown) => ClassifierLike };
  const base = new mod.PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] });
  const baseline = evaluate(items, asPredict(base), validPhone);
  report(`baseline ${process.env.PII_BASELINE}`, baseline);
  phoneDetail(baseline);
  const cpuBase = cpuPerItem(asPredict(base), items, timed);
  console.log(`baseline CPU µs per item: p50 ${fmt(cpuBase.p50)} mean ${fmt(cpuBase.mean)} p99 ${fmt(cpuBase.p99)}`);
  results.baseline = { ...baseline, cpu: cpuBase };
}

if (process.env.PII_METADATA === '1') {
  console.log('\n== phone detector alone, by metadata set (size of the JSON the import loads)');
  const rows: string[][] = [];
  for (const [name, metadata] of [
    ['min', minMetadata],
    ['max', maxMetadata],
    ['mobile', mobileMetadata],
  ] as const) {
    const d = phoneDetector(DEFAULT_PHONE_REGIONS, metadata);
    const predict: Predict = (text) => d.find(new TextView(text)).map((f) => ({ ...f, label: 'PHONE' }));
    const s = evaluate(items, predict, validPhone);
    const t = s.types.PHONE;
    const c = cpuPerItem(predict, items, timed);
    rows.push([
      name,
      `${Math.round(JSON.stringify(metadata).length / 1024)} KiB`,
      fmt(t.recall, 3),
      fmt(s.phoneValidRecall, 3),
      fmt(t.precision, 3),
      fmt(t.f1, 3),
      `${fmt(100 * s.negativeRate, 2)}%`,
      fmt(c.p50),
      fmt(c.mean),
    ]);
  }
  printTable(['metadata', 'size', 'recall', 'recall valid', 'precision', 'F1', 'hard neg', 'µs p50', 'µs mean'], rows);
}

if (process.env.PII_JSON) writeFileSync(process.env.PII_JSON, JSON.stringify(results, null, 2));
