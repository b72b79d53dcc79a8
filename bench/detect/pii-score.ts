/**
 * Scoring of PII predictions against the labelled items of pii-generate.ts (shared by the bench
 * runner and the CI regression test).
 */
import type { Item } from './pii-generate.ts';

export type Predict = (text: string) => Array<{ start: number; end: number; label: string }>;

export interface TypeScores {
  gold: number;
  found: number;
  recall: number;
  predicted: number;
  correct: number;
  precision: number;
  f1: number;
}

export interface Scores {
  types: Record<string, TypeScores>;
  /** Per item group (phone:<locale>:<style>, email, card…): recall, and for phones on valid values. */
  groups: Record<string, { gold: number; found: number; recall: number; validGold: number; validRecall: number }>;
  phoneValidGold: number;
  phoneValidRecall: number;
  negativesFlagged: number;
  negativeRate: number;
  negativesByGroup: Record<string, { total: number; flagged: number }>;
  negativeExamples: string[];
  missedPhones: string[];
}

const overlap = (a: { start: number; end: number }, b: { start: number; end: number }) =>
  Math.max(0, Math.min(a.end, b.end) - Math.max(a.start, b.start));

export function evaluate(
  items: Item[],
  predict: Predict,
  validPhone: (value: string, locale: string) => boolean,
): Scores {
  const types: Record<string, TypeScores> = {};
  const type = (t: string) => {
    types[t] ??= { gold: 0, found: 0, recall: 0, predicted: 0, correct: 0, precision: 0, f1: 0 };
    return types[t];
  };
  const groups: Scores['groups'] = {};
  const negativesByGroup: Scores['negativesByGroup'] = {};
  const negativeExamples: string[] = [];
  const missedPhones: string[] = [];
  let negativesFlagged = 0;
  let validGold = 0;
  let validFound = 0;
  for (const item of items) {
    const predicted = predict(item.text);
    if (item.kind === 'hard_negative') {
      negativesByGroup[item.group] ??= { total: 0, flagged: 0 };
      const g = negativesByGroup[item.group];
      g.total++;
      for (const p of predicted) type(p.label).predicted++;
      if (predicted.length > 0) {
        g.flagged++;
        negativesFlagged++;
        negativeExamples.push(
          `${item.text} → ${predicted.map((p) => `${p.label}:${item.text.slice(p.start, p.end)}`).join(', ')}`,
        );
      }
      continue;
    }
    groups[item.group] ??= { gold: 0, found: 0, recall: 0, validGold: 0, validRecall: 0 };
    const g = groups[item.group];
    for (const gold of item.spans) {
      const t = type(gold.type);
      t.gold++;
      g.gold++;
      const covered = predicted.filter((p) => p.label === gold.type).reduce((n, p) => n + overlap(p, gold), 0);
      const hit = covered * 2 >= gold.end - gold.start;
      if (hit) {
        t.found++;
        g.found++;
      }
      if (gold.type === 'PHONE') {
        const locale = item.group.split(':')[1];
        const value = item.text.slice(gold.start, gold.end);
        if (!hit)
          missedPhones.push(`${locale}: ${value}${validPhone(value, locale) ? ' (valid)' : ''} in ${item.text}`);
        if (validPhone(value, locale)) {
          g.validGold++;
          validGold++;
          if (hit) {
            g.validRecall++;
            validFound++;
          }
        }
      }
    }
    for (const p of predicted) {
      const t = type(p.label);
      t.predicted++;
      if (item.spans.some((gold) => gold.type === p.label && overlap(p, gold) > 0)) t.correct++;
    }
  }
  for (const t of Object.values(types)) {
    t.recall = t.gold ? t.found / t.gold : Number.NaN;
    t.precision = t.predicted ? t.correct / t.predicted : Number.NaN;
    t.f1 = t.recall + t.precision > 0 ? (2 * t.recall * t.precision) / (t.recall + t.precision) : 0;
  }
  for (const g of Object.values(groups)) {
    g.recall = g.gold ? g.found / g.gold : Number.NaN;
    g.validRecall = g.validGold ? g.validRecall / g.validGold : Number.NaN;
  }
  const negatives = items.filter((i) => i.kind === 'hard_negative').length;
  return {
    types,
    groups,
    phoneValidGold: validGold,
    phoneValidRecall: validGold ? validFound / validGold : Number.NaN,
    negativesFlagged,
    negativeRate: negatives ? negativesFlagged / negatives : 0,
    negativesByGroup,
    negativeExamples,
    missedPhones,
  };
}
