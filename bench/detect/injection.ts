/**
 * Prompt injection / jailbreak detection, measured on the labelled corpus of
 * scripts/models/injection-corpus.ts (committed part always; public part when assembled in .data/,
 * see scripts/models/assemble-injection-data.ts).
 *
 *   npx tsx bench/detect/injection.ts [--split test|val|train|all] [--committed] [--json FILE] [--markdown]
 *
 * Detectors, all as configs/safety-filter.yaml ships them:
 * - `pattern`: the Tier A `prompt_injection` classifier, flagged where the default policy blocks on it alone;
 * - `tier-b`: the shipped Tier B model (`injection_model`), flagged where the default policy blocks on
 *   it alone (at its classifier threshold if the policy has no rule on it);
 * - `default` / `strict`: the shipped tenants `dev` and `acme-health` — their classifiers and their
 *   policy (default.yaml, strict.yaml) — flagged when the ingress policy blocks the prompt.
 * Per detector: precision, recall, F1, false-positive rate on ordinary prompts and on hard negatives,
 * recall at 1 % and 5 % false positives (from the score, for single classifiers), CPU µs per item
 * (process CPU time over the run / items) and the median wall time per item; then the same per
 * source and per category.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import type { ClassifierResult, ClassifierSet } from '../../plugins/classify/api.ts';
import classify from '../../plugins/classify/index.ts';
import { scoresOf } from '../../plugins/policy/data.ts';
import type { PolicySet } from '../../plugins/policy/engine.ts';
import { loadPolicies } from '../../plugins/policy/store.ts';
import type { ResourceDefinition } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { type LabelledText, loadCorpus, POSITIVE_CATEGORIES } from '../../scripts/models/injection-corpus.ts';
import { breakdown, dec, pct, percentile, type Scored, type Summary, summarize } from './lib/metrics.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const CONFIG = join(ROOT, 'configs/safety-filter.yaml');

export interface DetectorRun {
  name: string;
  description: string;
  items: Scored[];
  cpu_us_per_item: number;
  p50_us: number;
}

interface Tenant {
  id: string;
  policy: string;
  classifiers?: string[];
}

/** The shipped safety filter's classifier set, tenants and policies. */
export async function shippedFilter(): Promise<{
  set: ClassifierSet;
  close: () => Promise<void>;
  policies: PolicySet;
  tenants: Tenant[];
  entries: Array<{ name: string; type: string; [k: string]: unknown }>;
}> {
  const config = parseYaml(readFileSync(CONFIG, 'utf8')) as {
    resources: Record<string, Record<string, unknown>>;
  };
  const { type: _type, ...options } = config.resources.classifiers; // `type` names the resource type
  const [resource] = classify as unknown as [ResourceDefinition<Record<string, unknown>, ClassifierSet>];
  const instance = await resource.create(options, createTestEnv({ configDir: dirname(CONFIG) }));
  const tenants = (
    parseYaml(readFileSync(join(dirname(CONFIG), 'safety-filter/tenants.yaml'), 'utf8')) as { tenants: Tenant[] }
  ).tenants;
  const policies = await loadPolicies({ files: [], dirs: [join(dirname(CONFIG), 'safety-filter/policies')] });
  return {
    set: instance.value,
    close: async () => instance.close?.(),
    policies,
    tenants,
    entries: options.classifiers as Array<{ name: string; type: string }>,
  };
}

/** Whether the policy `file` blocks a prompt at ingress given these classifier results. */
export function policyBlocks(policies: PolicySet, file: string, results: Record<string, ClassifierResult>): boolean {
  const data = {
    classifiers: scoresOf(results),
    phase: 'ingress',
    caller: { id: null, authenticated: true, attributes: {} },
    body: null,
    annotations: {},
  };
  return policies.evaluate(policies.select(file), data, 'ingress').decision.action === 'block';
}

async function measure(
  name: string,
  description: string,
  corpus: LabelledText[],
  run: (text: string) => Promise<{ score?: number; flagged: boolean }>,
): Promise<DetectorRun> {
  // Warm-up: JIT, lazy model loads.
  for (const e of corpus.slice(0, 50)) await run(e.text);
  const times: number[] = [];
  const items: Scored[] = [];
  const cpu = process.cpuUsage();
  for (const e of corpus) {
    const t0 = performance.now();
    const r = await run(e.text);
    times.push((performance.now() - t0) * 1000);
    items.push({ label: e.label, kind: e.category, source: e.source, score: r.score, flagged: r.flagged });
  }
  const used = process.cpuUsage(cpu);
  return {
    name,
    description,
    items,
    cpu_us_per_item: (used.user + used.system) / corpus.length,
    p50_us: percentile(times, 50),
  };
}

export async function evaluateInjection(corpus: LabelledText[]): Promise<DetectorRun[]> {
  const filter = await shippedFilter();
  const { set, policies, tenants } = filter;
  const defaultTenant = tenants.find((t) => t.id === 'dev');
  const strictTenant = tenants.find((t) => t.id === 'acme-health');
  if (!defaultTenant || !strictTenant)
    throw new Error('tenants dev and acme-health must be in configs/safety-filter/tenants.yaml');
  const modelEntry = filter.entries.find((e) => e.type === 'ml' && e.format === 'linear-features');
  if (!modelEntry) throw new Error('configs/safety-filter.yaml declares no linear-features model');
  const patternName = 'prompt_injection';
  const modelName = modelEntry.name;
  const pattern = set.get(patternName);
  const model = set.get(modelName);
  if (!pattern?.classifySync || !model)
    throw new Error(`classifiers ${patternName} and ${modelName} must be in the set`);
  await model.load();

  const one = (name: string, r: ClassifierResult) => ({ [name]: r });
  const runs: DetectorRun[] = [];
  runs.push(
    await measure('pattern', 'Tier A prompt_injection, at the default policy', corpus, async (text) => {
      const r = pattern.classifySync!(text);
      return { score: r.score, flagged: policyBlocks(policies, defaultTenant.policy, one(patternName, r)) };
    }),
  );
  const policyReadsModel = policies
    .select(defaultTenant.policy)
    .some((p) =>
      policies.byName.get(p)?.rules.some((rule) => JSON.stringify(rule).includes(`classifiers.${modelName}.`)),
    );
  runs.push(
    await measure(
      'tier-b',
      `Tier B ${modelEntry.model}, ${policyReadsModel ? 'at the default policy' : 'at its classifier threshold'}`,
      corpus,
      async (text) => {
        const r = await model.classify(text);
        const flagged = policyReadsModel
          ? policyBlocks(policies, defaultTenant.policy, one(modelName, r))
          : r.label === 'injection';
        return { score: r.score, flagged };
      },
    ),
  );
  for (const [id, tenant] of [
    ['default', defaultTenant],
    ['strict', strictTenant],
  ] as const) {
    runs.push(
      await measure(
        id,
        `shipped tenant ${tenant.id}: [${(tenant.classifiers ?? []).join(', ')}] + ${tenant.policy}`,
        corpus,
        async (text) => {
          const results = await set.classify(tenant.classifiers, text);
          return { flagged: policyBlocks(policies, tenant.policy, results) };
        },
      ),
    );
  }
  await filter.close();
  return runs;
}

function overviewRow(name: string, s: Summary, run?: DetectorRun): string[] {
  return [
    name,
    String(s.n),
    dec(s.precision),
    dec(s.recall),
    dec(s.f1),
    pct(s.fpr_ordinary),
    pct(s.fpr_hard),
    dec(s.recall_at_1pct_fp),
    dec(s.recall_at_5pct_fp),
    run ? run.cpu_us_per_item.toFixed(0) : '',
    run ? run.p50_us.toFixed(0) : '',
  ];
}

function table(head: string[], rows: string[][], markdown: boolean): string {
  if (markdown) {
    const line = (r: string[]) => `| ${r.join(' | ')} |`;
    return [line(head), line(head.map((_, i) => (i === 0 ? '---' : '---:'))), ...rows.map(line)].join('\n');
  }
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

/** Per source (or category): flagged share = recall for attacks, false-positive rate for benign. */
function flaggedRate(s: Summary): string {
  if (s.positives > 0 && s.negatives === 0) return dec(s.recall, 2);
  if (s.negatives > 0 && s.positives === 0) return pct(s.fpr);
  return `${dec(s.recall, 2)} / ${pct(s.fpr)}`;
}

export function report(runs: DetectorRun[], corpus: LabelledText[], markdown: boolean): string {
  const out: string[] = [];
  out.push(
    table(
      [
        'detector',
        'n',
        'precision',
        'recall',
        'F1',
        'FP ordinary',
        'FP hard neg.',
        'R@1%FP',
        'R@5%FP',
        'CPU µs/item',
        'p50 µs',
      ],
      runs.map((r) => overviewRow(r.name, summarize(r.items), r)),
      markdown,
    ),
  );
  const keyed = (key: 'source' | 'category') => {
    const labels = new Map<string, string>();
    for (const e of corpus) labels.set(key === 'source' ? e.source : e.category, e.label === 1 ? 'attack' : 'benign');
    const per = runs.map(
      (r) =>
        new Map(
          breakdown(
            r.items.map((i, k) => ({ ...i, source: key === 'source' ? i.source : corpus[k].category })),
            (i) => i.source,
          ),
        ),
    );
    const names = [...labels.keys()].sort((a, b) => (labels.get(a)! + a).localeCompare(labels.get(b)! + b));
    return table(
      [key, 'kind', 'n', ...runs.map((r) => r.name)],
      names.map((n) => [n, labels.get(n)!, String(per[0].get(n)?.n ?? 0), ...per.map((p) => flaggedRate(p.get(n)!))]),
      markdown,
    );
  };
  out.push('', 'Flagged share per source (recall for attacks, false-positive rate for benign):', '', keyed('source'));
  out.push('', 'Per category:', '', keyed('category'));
  return out.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      split: { type: 'string', default: 'test' },
      committed: { type: 'boolean', default: false },
      json: { type: 'string' },
      markdown: { type: 'boolean', default: false },
    },
  });
  const all = loadCorpus({ publicPart: !values.committed });
  const corpus = values.split === 'all' ? all : all.filter((e) => e.split === values.split);
  const pos = corpus.filter((e) => POSITIVE_CATEGORIES.includes(e.category)).length;
  const hasPublic = all.some(
    (e) =>
      !e.source.startsWith('repo-') &&
      !/^gen-(hijack|hijack-clean|extraction|roleplay|suffix|hard-negatives|chat|structured|word-salad|act-as)$/.test(
        e.source,
      ),
  );
  console.log(
    `injection: ${corpus.length} examples (${pos} attacks), split ${values.split}` +
      (hasPublic ? '' : ' — committed part only: run scripts/models/assemble-injection-data.ts for the public sources'),
  );
  const runs = await evaluateInjection(corpus);
  console.log(report(runs, corpus, values.markdown ?? false));
  const file =
    values.json ?? join(ROOT, `bench/results/detect-injection-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        split: values.split,
        examples: corpus.length,
        detectors: runs.map((r) => ({
          name: r.name,
          description: r.description,
          cpu_us_per_item: r.cpu_us_per_item,
          p50_us: r.p50_us,
          overall: summarize(r.items),
          per_source: Object.fromEntries(breakdown(r.items, (i) => i.source)),
        })),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nresults: ${file}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
