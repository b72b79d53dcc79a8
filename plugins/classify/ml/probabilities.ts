/** From a model's class probabilities to the classifier's label, score and confidence. */

export interface Prediction {
  label: string;
  score: number;
  confidence: number;
  detail?: Record<string, unknown>;
}

/** Softmax of row `row` of a [rows, width] logits matrix, numerically stable. */
export function softmaxRow(logits: ArrayLike<number>, row: number, width: number): number[] {
  const offset = row * width;
  let max = Number.NEGATIVE_INFINITY;
  for (let j = 0; j < width; j++) max = Math.max(max, logits[offset + j]);
  const out = new Array<number>(width);
  let sum = 0;
  for (let j = 0; j < width; j++) {
    out[j] = Math.exp(logits[offset + j] - max);
    sum += out[j];
  }
  for (let j = 0; j < width; j++) out[j] /= sum;
  return out;
}

function argmax(probs: number[], among: (i: number) => boolean): number {
  let best = -1;
  for (let i = 0; i < probs.length; i++) if (among(i) && (best < 0 || probs[i] > probs[best])) best = i;
  return best;
}

/**
 * Without positive labels: label = most probable class, score = confidence = its probability.
 * With positive labels (e.g. INJECTION, JAILBREAK): score = their summed probability; when it
 * reaches the threshold the label is the most probable positive class, otherwise the most
 * probable other class; confidence = the probability mass of the side chosen.
 */
export function predictionFromProbabilities(
  probs: number[],
  labels: string[],
  positive: ReadonlySet<number> | null,
  threshold: number,
): Prediction {
  const probabilities = Object.fromEntries(labels.map((label, i) => [label, probs[i]]));
  if (!positive) {
    const top = argmax(probs, () => true);
    return { label: labels[top], score: probs[top], confidence: probs[top], detail: { probabilities } };
  }
  let score = 0;
  for (const i of positive) score += probs[i];
  score = Math.min(1, score);
  const flagged = score >= threshold;
  const side = argmax(probs, (i) => positive.has(i) === flagged);
  const label = labels[side >= 0 ? side : argmax(probs, () => true)];
  return { label, score, confidence: flagged ? score : 1 - score, detail: { probabilities, flagged } };
}

/** Combines the predictions of a long text's windows: the most suspicious window, or the mean when nothing is "positive". */
export function combineWindows(probRows: number[][], positive: ReadonlySet<number> | null): number[] {
  if (probRows.length === 1) return probRows[0];
  if (positive) {
    const positiveMass = (row: number[]) => [...positive].reduce((sum, i) => sum + row[i], 0);
    return probRows.reduce((best, row) => (positiveMass(row) > positiveMass(best) ? row : best));
  }
  const mean = new Array<number>(probRows[0].length).fill(0);
  for (const row of probRows) {
    for (let j = 0; j < row.length; j++) mean[j] += row[j] / probRows.length;
  }
  return mean;
}

/** Indices of `wanted` among `labels`, matched case-insensitively; throws naming the unknown ones. */
export function labelIndices(wanted: string[] | undefined, labels: string[], where: string): Set<number> | null {
  if (!wanted || wanted.length === 0) return null;
  const lower = labels.map((l) => l.toLowerCase());
  const unknown = wanted.filter((w) => !lower.includes(w.toLowerCase()));
  if (unknown.length > 0) {
    throw new Error(
      `positive_labels ${JSON.stringify(unknown)} are not labels of ${where} (labels: ${JSON.stringify(labels)})`,
    );
  }
  return new Set(wanted.map((w) => lower.indexOf(w.toLowerCase())));
}
