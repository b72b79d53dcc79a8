/**
 * UCB pair selection for pairwise comparisons (a multi-armed bandit whose arms are pairs).
 *
 * For entities i, j with ratings r, comparison counts n_i, n_j, n_ij comparisons of this very
 * pair, and N comparisons in all (half the sum of the n_i of the candidates):
 *
 *   p_ij      = 1 / (1 + 10^((r_j − r_i) / 400))          Elo probability that i wins
 *   q_ij      = 4 · p_ij · (1 − p_ij)                      outcome uncertainty, 1 for equal ratings
 *   u_i       = 1 / sqrt(1 + n_i)                          rating uncertainty of i
 *   score(ij) = q_ij · (u_i + u_j) / 2  +  c · sqrt( ln(N + 1) / (n_ij + 1) )
 *
 * The first term exploits (a comparison between close, little-known entities tells the most);
 * the second explores (pairs rarely compared), weighted by the exploration constant c.
 *
 * Cold start comes first: while an entity has fewer than `coldStart` comparisons, the entity
 * with the fewest (lowest id on ties) is one side of the pair, and its partner is the one that
 * maximises the score with it. Otherwise the pair with the highest score wins. Ties go to the
 * lowest ids, so the choice is deterministic.
 */
import { expectedScore } from '../elo/api.ts';

export interface BanditArm {
  id: number;
  rating: number;
  /** Comparisons this entity took part in. */
  comparisons: number;
}

export interface UcbOptions {
  /** Exploration constant c. */
  exploration: number;
  /** Entities with fewer comparisons than this are served first (default 1). */
  coldStart?: number;
  /** Elo scale (default 400). */
  scale?: number;
}

export interface UcbChoice {
  first: BanditArm;
  second: BanditArm;
  score: number;
  reason: 'cold_start' | 'ucb';
}

/** Comparisons of the pair (order-free). */
export type PairCount = (a: number, b: number) => number;

export function ucbScore(a: BanditArm, b: BanditArm, pairN: number, total: number, options: UcbOptions): number {
  const p = expectedScore(a.rating, b.rating, options.scale ?? 400);
  const q = 4 * p * (1 - p);
  const u = (1 / Math.sqrt(1 + a.comparisons) + 1 / Math.sqrt(1 + b.comparisons)) / 2;
  return q * u + options.exploration * Math.sqrt(Math.log(total + 1) / (pairN + 1));
}

/** The pair to compare next among `arms` (at least two). */
export function ucbPair(arms: readonly BanditArm[], pairCount: PairCount, options: UcbOptions): UcbChoice {
  if (arms.length < 2) throw new Error('need at least two entities');
  const sorted = [...arms].sort((x, y) => x.id - y.id);
  let total = 0;
  for (const a of sorted) total += a.comparisons;
  total /= 2;
  const score = (a: BanditArm, b: BanditArm) => ucbScore(a, b, pairCount(a.id, b.id), total, options);

  let cold: BanditArm | undefined;
  for (const a of sorted)
    if (a.comparisons < (options.coldStart ?? 1) && (!cold || a.comparisons < cold.comparisons)) cold = a;
  if (cold) {
    let best: UcbChoice | undefined;
    for (const b of sorted) {
      if (b.id === cold.id) continue;
      const s = score(cold, b);
      if (!best || s > best.score) best = { first: cold, second: b, score: s, reason: 'cold_start' };
    }
    return best!;
  }

  let best: UcbChoice | undefined;
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const s = score(sorted[i]!, sorted[j]!);
      if (!best || s > best.score) best = { first: sorted[i]!, second: sorted[j]!, score: s, reason: 'ucb' };
    }
  }
  return best!;
}
