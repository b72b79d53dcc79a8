/**
 * "Did you mean": the closest known name to a misspelt one, when it is close enough to be the
 * likely intent (edit distance at most a third of the word, at least 1), else nothing.
 */
import { distance } from 'fastest-levenshtein';

export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.max(1, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const d = distance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance && d <= limit) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)` or ''. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const match = closest(word, candidates);
  return match === undefined || match === word ? '' : ` (did you mean "${match}"?)`;
}
