/**
 * Regression check of the secret detectors on a small fixed subset of the synthetic evaluation
 * (bench/detect/secrets-generate.ts, seed 25: a key of every documented format bare in prose and
 * assigned in code, credentials known by their context, near misses and placeholders of every
 * third format, documented example keys, hard negatives: UUIDs, git SHAs, hashes, base64 images,
 * integrity strings, code without secrets). The classifier is the shipped one
 * (configs/safety-filter.yaml: `detectors: [secrets]`), loaded from that file. The figures on the
 * whole set are in docs/classifiers.md (`npm run eval:detect -- secrets`).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { Item } from '../../bench/detect/secrets-generate.ts';
import { shippedPredict } from '../../bench/detect/secrets-predict.ts';
import { evaluateSecrets } from '../../bench/detect/secrets-score.ts';
import { PatternClassifier, type PatternClassifierSpec } from '../../plugins/classify/patterns/classifier.ts';
import { KEY_FORMATS } from '../../plugins/classify/patterns/key-formats.ts';

const items: Item[] = readFileSync(new URL('../../bench/detect/secrets-sample.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line));

const config = parse(readFileSync(new URL('../../configs/safety-filter.yaml', import.meta.url), 'utf8'));
const spec = (config.resources.classifiers.classifiers as PatternClassifierSpec[]).find((c) => c.name === 'secrets');

describe('secret detection on the fixed evaluation subset', () => {
  const secrets = new PatternClassifier(spec as PatternClassifierSpec);
  const scores = evaluateSecrets(items, shippedPredict(secrets));

  it('the subset has every format, bare and assigned, and every kind of negative', () => {
    expect(spec?.detectors).toEqual(['secrets']);
    expect(KEY_FORMATS.length).toBeGreaterThanOrEqual(100);
    const bare = new Set(items.filter((i) => i.kind === 'bare').map((i) => i.group));
    expect([...bare].sort()).toEqual(KEY_FORMATS.map((f) => f.id).sort());
    expect(scores.kinds.near_miss.total).toBeGreaterThanOrEqual(50);
    expect(scores.kinds.placeholder.total).toBeGreaterThanOrEqual(100);
    expect(scores.kinds.hard_negative.total).toBeGreaterThanOrEqual(12);
  });

  it('recall: bare and assigned at least 0.97 (1.0 when written); found by the provider’s detector at least 0.97', () => {
    expect(scores.kinds.bare.rate, scores.missed.join('\n')).toBeGreaterThanOrEqual(0.97);
    expect(scores.kinds.assigned.rate, scores.missed.join('\n')).toBeGreaterThanOrEqual(0.97);
    const all = Object.values(scores.providers);
    const withProvider = all.reduce((n, p) => n + p.withProvider, 0) / all.reduce((n, p) => n + p.total, 0);
    expect(withProvider).toBeGreaterThanOrEqual(0.97);
  });

  it('near misses: at most 5% flagged (none when written)', () => {
    expect(scores.kinds.near_miss.rate, scores.flagged.join('\n')).toBeLessThanOrEqual(0.05);
  });

  it('no placeholder, documented example or hard negative is flagged', () => {
    expect(scores.flagged.filter((f) => !f.startsWith('near_miss'))).toEqual([]);
  });
});
