/**
 * Pair choices by content similarity (TF-IDF or embedding cosine, see similarity.ts), over a
 * candidate list of entities. Every choice is deterministic: ties go to the pair compared least,
 * then to the entities compared least, then to the lowest ids.
 *
 * - `most-dissimilar`: the pair with the lowest similarity.
 * - `most-similar`: the pair with the highest similarity.
 * - `anchor-dissimilar` (the next comparison): the entity compared least is one side; its
 *   partner is, among the entities it has not met yet when there are any, the most dissimilar.
 */
import type { BanditArm, PairCount } from './ucb.ts';

export type SimilarityStrategy = 'most-dissimilar' | 'most-similar' | 'anchor-dissimilar';

export interface SimilarChoice {
  first: BanditArm;
  second: BanditArm;
  similarity: number;
}

/** `similarity(i, j)` takes indices into `arms`. */
export function similarPair(
  arms: readonly BanditArm[],
  similarity: (i: number, j: number) => number,
  pairCount: PairCount,
  strategy: SimilarityStrategy,
): SimilarChoice {
  if (arms.length < 2) throw new Error('need at least two entities');
  const order = arms.map((_, k) => k).sort((x, y) => arms[x]!.id - arms[y]!.id);

  // Lexicographic keys, smaller is better.
  const keyOf = (i: number, j: number, sim: number): number[] => {
    const a = arms[i]!;
    const b = arms[j]!;
    const met = pairCount(a.id, b.id);
    const simKey = strategy === 'most-similar' ? -sim : sim;
    return strategy === 'anchor-dissimilar'
      ? [met > 0 ? 1 : 0, simKey, b.comparisons]
      : [simKey, met, a.comparisons + b.comparisons];
  };
  const better = (x: number[], y: number[]) => {
    for (let k = 0; k < x.length; k++) if (x[k] !== y[k]) return x[k]! < y[k]!;
    return false;
  };

  let best: { i: number; j: number; sim: number; key: number[] } | undefined;
  const consider = (i: number, j: number) => {
    const sim = similarity(i, j);
    const key = keyOf(i, j, sim);
    if (!best || better(key, best.key)) best = { i, j, sim, key };
  };

  if (strategy === 'anchor-dissimilar') {
    let anchor = order[0]!;
    for (const k of order) if (arms[k]!.comparisons < arms[anchor]!.comparisons) anchor = k;
    for (const k of order) if (k !== anchor) consider(anchor, k);
  } else {
    for (let x = 0; x < order.length; x++) for (let y = x + 1; y < order.length; y++) consider(order[x]!, order[y]!);
  }
  const b = best!;
  return { first: arms[b.i]!, second: arms[b.j]!, similarity: b.sim };
}
