/**
 * Elo rating math. The expected score of A against B is the logistic curve in base 10 with a
 * 400-point scale (a 400-point lead means 10:1 odds); after a game each rating moves by
 * K times (actual − expected), so the two changes always sum to zero.
 */

/** Probability that a player rated `ra` beats one rated `rb`. */
export function expectedScore(ra: number, rb: number, scale = 400): number {
  return 1 / (1 + 10 ** ((rb - ra) / scale));
}

/**
 * New ratings after one game. `scoreA` is A's result: 1 win, 0 loss, 0.5 draw.
 *   A' = A + K·(S − E_A),  B' = B − K·(S − E_A)
 */
export function eloUpdate(ra: number, rb: number, scoreA: number, k = 32, scale = 400): [number, number] {
  const delta = k * (scoreA - expectedScore(ra, rb, scale));
  return [ra + delta, rb - delta];
}
