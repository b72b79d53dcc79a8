/**
 * Detection metrics shared by the bench/detect families: confusion counts at a decision,
 * precision / recall / F1, false-positive rates on ordinary text and on hard negatives, recall at
 * a fixed false-positive rate (threshold taken from the negatives' scores), and per-group breakdowns.
 */

export interface Scored {
  /** 1 positive, 0 negative. */
  label: 0 | 1;
  /** Negatives: 'ordinary' or 'hard_negative' (or any other kind a family uses). */
  kind: string;
  source: string;
  /** Continuous score in [0, 1] (higher = more suspicious), when the detector has one. */
  score?: number;
  /** The detector's decision. */
  flagged: boolean;
}

export interface Summary {
  n: number;
  positives: number;
  negatives: number;
  tp: number;
  fp: number;
  fn: number;
  tn: number;
  precision: number | null;
  recall: number | null;
  f1: number | null;
  /** False-positive rate on all negatives, on ordinary ones, on hard negatives. */
  fpr: number | null;
  fpr_ordinary: number | null;
  fpr_hard: number | null;
  /** Recall when the threshold lets this share of the negatives through as false positives. */
  recall_at_1pct_fp: number | null;
  recall_at_5pct_fp: number | null;
}

const ratio = (a: number, b: number) => (b === 0 ? null : a / b);

/**
 * Recall at a false-positive budget: the lowest threshold t such that the share of negatives with
 * score ≥ t is ≤ `fpr`, then the share of positives with score ≥ t. Ties are never split (a
 * threshold flags every item at its score).
 */
export function recallAtFpr(items: Scored[], fpr: number): number | null {
  const neg = items.filter((i) => i.label === 0 && i.score !== undefined).map((i) => i.score as number);
  const pos = items.filter((i) => i.label === 1 && i.score !== undefined).map((i) => i.score as number);
  if (neg.length === 0 || pos.length === 0) return null;
  neg.sort((a, b) => b - a);
  const allowed = Math.floor(fpr * neg.length);
  // Threshold just above the (allowed+1)-th highest negative score.
  const limit = allowed < neg.length ? neg[allowed] : Number.NEGATIVE_INFINITY;
  return pos.filter((s) => s > limit).length / pos.length;
}

/** The threshold recallAtFpr uses (flag when score > the returned value). */
export function thresholdAtFpr(negativeScores: number[], fpr: number): number {
  const neg = [...negativeScores].sort((a, b) => b - a);
  const allowed = Math.floor(fpr * neg.length);
  return allowed < neg.length ? neg[allowed] : Number.NEGATIVE_INFINITY;
}

export function summarize(items: Scored[]): Summary {
  let tp = 0;
  let fp = 0;
  let fn = 0;
  let tn = 0;
  let fpOrd = 0;
  let nOrd = 0;
  let fpHard = 0;
  let nHard = 0;
  for (const i of items) {
    if (i.label === 1) {
      if (i.flagged) tp++;
      else fn++;
    } else {
      if (i.flagged) fp++;
      else tn++;
      if (i.kind === 'hard_negative') {
        nHard++;
        if (i.flagged) fpHard++;
      } else {
        nOrd++;
        if (i.flagged) fpOrd++;
      }
    }
  }
  const precision = ratio(tp, tp + fp);
  const recall = ratio(tp, tp + fn);
  const f1 =
    precision === null || recall === null
      ? null
      : precision + recall === 0
        ? 0
        : (2 * precision * recall) / (precision + recall);
  return {
    n: items.length,
    positives: tp + fn,
    negatives: fp + tn,
    tp,
    fp,
    fn,
    tn,
    precision,
    recall,
    f1,
    fpr: ratio(fp, fp + tn),
    fpr_ordinary: ratio(fpOrd, nOrd),
    fpr_hard: ratio(fpHard, nHard),
    recall_at_1pct_fp: recallAtFpr(items, 0.01),
    recall_at_5pct_fp: recallAtFpr(items, 0.05),
  };
}

/** summarize() per value of `key`, keys sorted. */
export function breakdown(items: Scored[], key: (i: Scored) => string): Array<[string, Summary]> {
  const groups = new Map<string, Scored[]>();
  for (const i of items) {
    const k = key(i);
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  }
  return [...groups.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([k, g]) => [k, summarize(g)]);
}

/** Percentile (nearest rank) of unsorted values. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const v = [...values].sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))];
}

export const pct = (v: number | null | undefined, digits = 1) =>
  v === null || v === undefined ? '-' : `${(v * 100).toFixed(digits)}%`;
export const dec = (v: number | null | undefined, digits = 3) =>
  v === null || v === undefined ? '-' : v.toFixed(digits);
