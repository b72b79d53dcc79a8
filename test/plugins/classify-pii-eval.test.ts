/**
 * Regression check of the PII detectors on a small fixed subset of the synthetic evaluation
 * (bench/detect/pii-generate.ts, seed 25: faker phone numbers of 20 locales in sentences, e-mail
 * addresses, cards, IBANs, national identifiers, and hard negatives: order numbers, dates, times,
 * versions, prices, ISBNs, 16-digit numbers failing Luhn, postal codes, coordinates, ids). The
 * classifier is the shipped one (configs/safety-filter.yaml: `detectors: [pii]`), loaded from
 * that file. The figures on the whole set are in docs/classifiers.md (`npx tsx bench/detect/pii.ts`).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { Item } from '../../bench/detect/pii-generate.ts';
import { evaluate } from '../../bench/detect/pii-score.ts';
import { PatternClassifier, type PatternClassifierSpec } from '../../plugins/classify/patterns/classifier.ts';

const items: Item[] = readFileSync(new URL('../../bench/detect/pii-sample.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line));

const config = parse(readFileSync(new URL('../../configs/safety-filter.yaml', import.meta.url), 'utf8'));
const spec = (config.resources.classifiers.classifiers as PatternClassifierSpec[]).find((c) => c.name === 'pii');

describe('PII detection on the fixed evaluation subset', () => {
  const pii = new PatternClassifier(spec as PatternClassifierSpec);
  const scores = evaluate(
    items,
    (text) => pii.classifySync(text).spans,
    () => false,
  );

  it('the subset has every kind of value and hard negative', () => {
    expect(spec?.detectors).toEqual(['pii']);
    expect(Object.keys(scores.types).sort()).toEqual(['CREDIT_CARD', 'EMAIL', 'IBAN', 'NATIONAL_ID', 'PHONE']);
    expect(Object.keys(scores.negativesByGroup)).toHaveLength(11);
    expect(scores.types.PHONE.gold).toBeGreaterThanOrEqual(120); // 20 locales
  });

  it('phone numbers: recall at least 0.93 (0.954 here when written; 0.777 before libphonenumber), every one found a phone', () => {
    const phone = scores.types.PHONE;
    expect(phone.recall, scores.missedPhones.join('\n')).toBeGreaterThanOrEqual(0.93);
    expect(phone.precision).toBe(1);
  });

  it('e-mail, cards, IBANs and national identifiers: all found, nothing else', () => {
    for (const type of ['EMAIL', 'CREDIT_CARD', 'IBAN', 'NATIONAL_ID']) {
      expect(scores.types[type].recall, type).toBe(1);
      expect(scores.types[type].precision, type).toBe(1);
    }
  });

  it('no hard negative is flagged', () => {
    expect(scores.negativeExamples).toEqual([]);
  });
});
