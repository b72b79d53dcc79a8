/**
 * Bradley–Terry maximum-likelihood ratings with bootstrap confidence intervals, as public arena
 * leaderboards publish them.
 *
 * Model: P(i beats j) = p_i / (p_i + p_j). The strengths are fitted with Hunter's MM algorithm
 * (2004), which increases the likelihood at every step:
 *
 *   p_i ← (W_i + prior) / ( Σ_j n_ij / (p_i + p_j) + 2·prior / (p_i + 1) )
 *
 * W_i is i's number of wins and n_ij the games between i and j. `prior` adds that many virtual
 * wins and as many virtual losses against a reference player of strength 1: without it an entity
 * that never lost (or never won) has no finite maximum-likelihood strength. With prior 0 the fit
 * is the plain MLE (it exists when every entity has both won and lost along a connected graph).
 *
 * Strengths are reported on the Elo scale, centred on `base`:
 *   rating_i = base + scale·log10(p_i) − mean_k(scale·log10(p_k))
 * so a 400-point gap means 10:1 odds, as with Elo.
 *
 * Bootstrap: resample the games with replacement (a seeded PRNG, so the same data and seed give
 * the same interval), refit, and take the percentile interval of each entity's rating.
 */
import { seededRandom } from './random.ts';

export interface BradleyTerryOptions {
  /** Virtual wins and losses against a reference of strength 1 (default 1; 0 = plain MLE). */
  prior?: number;
  /** Rating points per factor of 10 in odds (default 400). */
  scale?: number;
  /** Mean rating (default 1500). */
  base?: number;
  /** MM iterations at most (default 1000). */
  maxIterations?: number;
  /** Stop when no log-strength moves more than this (default 1e-10). */
  tolerance?: number;
}

export interface BootstrapOptions {
  /** Resamples (0 = no interval). */
  samples: number;
  /** PRNG seed (default 1). */
  seed?: number;
  /** Coverage of the interval (default 0.95). */
  level?: number;
}

export interface BradleyTerryResult {
  /** Rating per entity index. */
  ratings: Float64Array;
  /** MM iterations run for the point estimate. */
  iterations: number;
  /** Percentile interval per entity, when bootstrapped. */
  lower?: Float64Array;
  upper?: Float64Array;
}

/** Games aggregated per unordered pair: what every MM step reads. */
interface Tallies {
  wins: Float64Array;
  pairI: Int32Array;
  pairJ: Int32Array;
  pairN: Float64Array;
}

function tally(n: number, winners: ArrayLike<number>, losers: ArrayLike<number>, pick?: Int32Array): Tallies {
  const wins = new Float64Array(n);
  const slots = new Map<number, number>();
  const i: number[] = [];
  const j: number[] = [];
  const c: number[] = [];
  const m = pick ? pick.length : winners.length;
  for (let g = 0; g < m; g++) {
    const k = pick ? pick[g]! : g;
    const w = winners[k]!;
    const l = losers[k]!;
    wins[w]! += 1;
    const a = Math.min(w, l);
    const b = Math.max(w, l);
    const key = a * n + b;
    let slot = slots.get(key);
    if (slot === undefined) {
      slot = c.length;
      slots.set(key, slot);
      i.push(a);
      j.push(b);
      c.push(0);
    }
    c[slot]! += 1;
  }
  return { wins, pairI: Int32Array.from(i), pairJ: Int32Array.from(j), pairN: Float64Array.from(c) };
}

/** MM iterations from `start` (strengths); returns the strengths and the iteration count. */
function mm(n: number, t: Tallies, options: BradleyTerryOptions, start?: Float64Array) {
  // not the schema default: this function's own defaults (it is called by tests and the fit worker too)
  const prior = options.prior ?? 1;
  const maxIterations = options.maxIterations ?? 1000;
  const tolerance = options.tolerance ?? 1e-10;
  let p = start ? Float64Array.from(start) : new Float64Array(n).fill(1);
  const denom = new Float64Array(n);
  let iterations = 0;
  while (iterations < maxIterations) {
    iterations++;
    denom.fill(0);
    for (let s = 0; s < t.pairN.length; s++) {
      const a = t.pairI[s]!;
      const b = t.pairJ[s]!;
      const x = t.pairN[s]! / (p[a]! + p[b]!);
      denom[a]! += x;
      denom[b]! += x;
    }
    const next = new Float64Array(n);
    for (let k = 0; k < n; k++) {
      const d = denom[k]! + (prior > 0 ? (2 * prior) / (p[k]! + 1) : 0);
      // An entity with no games keeps its strength (it has no likelihood term).
      next[k] = d > 0 ? Math.max((t.wins[k]! + prior) / d, 1e-12) : p[k]!;
    }
    if (prior === 0) normalise(next);
    let moved = 0;
    for (let k = 0; k < n; k++) moved = Math.max(moved, Math.abs(Math.log(next[k]!) - Math.log(p[k]!)));
    p = next;
    if (moved < tolerance) break;
  }
  return { p, iterations };
}

/** Geometric mean 1: without a prior the likelihood fixes strengths only up to a common factor. */
function normalise(p: Float64Array): void {
  let sum = 0;
  for (const x of p) sum += Math.log(x);
  const f = Math.exp(sum / p.length);
  for (let k = 0; k < p.length; k++) p[k]! /= f;
}

function toRatings(p: Float64Array, options: BradleyTerryOptions): Float64Array {
  // not the schema default: this function's own (see mm)
  const scale = options.scale ?? 400;
  const base = options.base ?? 1500;
  const logs = Float64Array.from(p, (x) => scale * Math.log10(x));
  let mean = 0;
  for (const x of logs) mean += x / logs.length;
  return logs.map((x) => base + x - mean);
}

/** Linear-interpolation quantile of a sorted array. */
function quantile(sorted: Float64Array, q: number): number {
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/**
 * Fits `n` entities (indices 0..n-1) to the games `winners[g]` beat `losers[g]`, and, with
 * `bootstrap.samples > 0`, percentile intervals of each rating.
 */
export function bradleyTerry(
  n: number,
  winners: ArrayLike<number>,
  losers: ArrayLike<number>,
  options: BradleyTerryOptions = {},
  bootstrap?: BootstrapOptions,
): BradleyTerryResult {
  if (winners.length !== losers.length) throw new Error('winners and losers differ in length');
  const fit = mm(n, tally(n, winners, losers), options);
  const result: BradleyTerryResult = { ratings: toRatings(fit.p, options), iterations: fit.iterations };
  const samples = bootstrap?.samples ?? 0;
  if (samples <= 0 || winners.length === 0) return result;

  // not the schema default: this function's own (see mm)
  const random = seededRandom(bootstrap?.seed ?? 1);
  // not the schema default: this function's own (see mm)
  const level = bootstrap?.level ?? 0.95;
  const games = winners.length;
  // draws[k * samples + s]: entity k's rating in resample s.
  const draws = new Float64Array(n * samples);
  const pick = new Int32Array(games);
  // A resample needs far less precision than the point estimate: 1e-6 in log-strength is under
  // 0.001 rating points, and MM converges slowly (linearly) near the optimum.
  const resampleOptions = { ...options, tolerance: Math.max(options.tolerance ?? 1e-10, 1e-6) };
  for (let s = 0; s < samples; s++) {
    for (let g = 0; g < games; g++) pick[g] = Math.floor(random() * games);
    // Warm start from the point estimate: resamples are close to it, so MM needs few steps.
    const r = toRatings(mm(n, tally(n, winners, losers, pick), resampleOptions, fit.p).p, options);
    for (let k = 0; k < n; k++) draws[k * samples + s] = r[k]!;
  }
  const lower = new Float64Array(n);
  const upper = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    const mine = draws.subarray(k * samples, (k + 1) * samples).sort();
    lower[k] = quantile(mine, (1 - level) / 2);
    upper[k] = quantile(mine, 1 - (1 - level) / 2);
  }
  return { ...result, lower, upper };
}
