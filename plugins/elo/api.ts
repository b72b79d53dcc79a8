/**
 * Public contract of the elo plugin for other plugins (pair suggestion reads the bandit state
 * it keeps): the Elo expected score and the shape and key of a pair's bandit record.
 */
export { eloUpdate, expectedScore } from './elo.ts';

/**
 * Bandit state of one unordered pair, stored under the key `pairKey(a, b)`; `entity1_id` is the
 * lower id. Kept in the same transaction as the comparison that changes it.
 */
export interface PairState extends Record<string, unknown> {
  entity1_id: number;
  entity2_id: number;
  comparisons: number;
  entity1_wins: number;
  entity2_wins: number;
}

/** The store key of a pair's state: `"<lower id>:<higher id>"`. */
export function pairKey(a: number, b: number): string {
  return a < b ? `${a}:${b}` : `${b}:${a}`;
}
