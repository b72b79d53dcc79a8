/**
 * Secret detection measured on the synthetic set of secrets-generate.ts: recall on keys bare in
 * prose and assigned in code or config, per detector (provider) recall, the share of near misses,
 * placeholders and hard negatives flagged (per way / kind), and CPU µs per item.
 *
 *   npx tsx bench/detect/secrets.ts            # npm run eval:detect -- secrets
 *   SECRETS_BASELINE=/path/to/other/plugins/classify/patterns/classifier.ts npx tsx bench/detect/secrets.ts
 *
 * The classifier is the shipped one (configs/safety-filter.yaml: `detectors: [secrets]`): an item
 * is flagged when its label is `secret`, and then its findings (with their detector ids) are
 * scored. `SECRETS_SEED` (default 25) picks the set; `SECRETS_JSON=<file>` writes the figures.
 */
import { writeFileSync } from 'node:fs';
import { DETECTORS } from '../../plugins/classify/patterns/catalog.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { fmt, printTable } from '../common/report.ts';
import { cpuPerItem } from './lib/cpu.ts';
import { generateSecretsSet } from './secrets-generate.ts';
import { shippedPredict } from './secrets-predict.ts';
import { evaluateSecrets, type SecretScores } from './secrets-score.ts';

const seed = Number(process.env.SECRETS_SEED ?? 25);
const items = generateSecretsSet({ seed });
const count = (kind: string) => items.filter((i) => i.kind === kind).length;
console.log(
  `secrets set (seed ${seed}): ${count('bare')} bare and ${count('assigned')} assigned secrets, ${count('near_miss')} near misses, ` +
    `${count('placeholder')} placeholders and documented examples, ${count('hard_negative')} hard negatives; ` +
    `${DETECTORS.filter((d) => d.family === 'secrets').length} detectors`,
);

type ClassifierLike = { classifySync(text: string): { label: string } };

function report(name: string, s: SecretScores, detail = true): void {
  const k = s.kinds;
  console.log(`\n== ${name}`);
  printTable(
    ['items', 'total', 'flagged', 'rate', 'target'],
    [
      ['bare secrets (recall)', String(k.bare.total), String(k.bare.hit), fmt(k.bare.rate, 3), '≥ 0.90'],
      [
        'assigned secrets (recall)',
        String(k.assigned.total),
        String(k.assigned.hit),
        fmt(k.assigned.rate, 3),
        '≥ 0.90',
      ],
      ['near misses', String(k.near_miss.total), String(k.near_miss.hit), fmt(k.near_miss.rate, 3), '≤ 0.05'],
      [
        'placeholders / examples',
        String(k.placeholder.total),
        String(k.placeholder.hit),
        fmt(k.placeholder.rate, 3),
        '0',
      ],
      ['hard negatives', String(k.hard_negative.total), String(k.hard_negative.hit), fmt(k.hard_negative.rate, 3), '0'],
    ],
  );
  const providers = Object.entries(s.providers);
  const all = providers.reduce((a, [, p]) => a + p.total, 0);
  const withProvider = providers.reduce((a, [, p]) => a + p.withProvider, 0);
  if (detail)
    console.log(`found with the right provider's detector: ${withProvider}/${all} = ${fmt(withProvider / all, 3)}`);
  if (!detail) return;
  const weak = providers.filter(([, p]) => p.found < p.total || p.withProvider < p.total);
  console.log(`detectors below 1.0 recall or provider attribution (${weak.length} of ${providers.length}):`);
  printTable(
    ['detector', 'provider', 'secrets', 'recall', 'with provider'],
    weak.map(([id, p]) => [
      id,
      p.provider,
      String(p.total),
      fmt(p.found / p.total, 2),
      fmt(p.withProvider / p.total, 2),
    ]),
  );
  const groups = Object.entries(s.groups).filter(([, g]) => g.hit > 0);
  if (groups.length > 0) {
    console.log('flagged negatives by way / kind:');
    printTable(
      ['group', 'total', 'flagged', 'rate'],
      groups.map(([g, r]) => [g, String(r.total), String(r.hit), fmt(r.rate, 3)]),
    );
  }
  for (const m of s.missed.slice(0, 10)) console.log(`  missed ${m}`);
  for (const f of s.flagged.slice(0, 10)) console.log(`  flagged ${f}`);
}

const results: Record<string, unknown> = {};
const secrets = new PatternClassifier({ name: 'secrets', type: 'pattern', detectors: ['secrets'] });
const current = evaluateSecrets(items, shippedPredict(secrets));
report('this tree: detectors [secrets]', current);
results.current = { ...current, missed: current.missed.length, flagged: current.flagged };

const timed = [1, 2].map((k) => generateSecretsSet({ seed: seed + 1000 * k }));
const c = cpuPerItem((t) => secrets.classifySync(t), items, timed);
console.log(
  `\nCPU µs per item, secrets classifier (its first call, ${timed.reduce((n, t) => n + t.length, 0)} items of 2 other seeds): p50 ${fmt(c.p50)} mean ${fmt(c.mean)} p99 ${fmt(c.p99)}`,
);
results.cpu = c;

if (process.env.SECRETS_BASELINE) {
  const mod = (await import(process.env.SECRETS_BASELINE)) as {
    PatternClassifier: new (spec: unknown) => ClassifierLike;
  };
  const base = new mod.PatternClassifier({ name: 'secrets', type: 'pattern', detectors: ['secrets'] });
  // The baseline's own detector ids are unknown here: any flagged item counts, provider attribution does not.
  const baseline = evaluateSecrets(items, (text) =>
    base.classifySync(text).label === 'secret' ? [{ start: 0, end: text.length, detector: '?' }] : [],
  );
  report(`baseline ${process.env.SECRETS_BASELINE}`, baseline, false);
  results.baseline = { kinds: baseline.kinds };
}

if (process.env.SECRETS_JSON) writeFileSync(process.env.SECRETS_JSON, JSON.stringify(results, null, 2));
