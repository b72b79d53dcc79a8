/**
 * Which endpoint of a balanced upstream takes the next request, among the candidates (indices of
 * the endpoints usable now). Round-robin is the smooth weighted rotation (nginx's): over any
 * `sum(weights)` picks from a fresh state each endpoint is chosen exactly `weight` times, spread
 * out rather than in runs. Least-request is the power of two choices: two distinct endpoints drawn
 * by weight, the one with fewer requests under way per weight wins, which avoids both the herd a
 * global minimum would attract and the cost of scanning every endpoint. Consistent hash
 * (hash-ring.ts) sends the same request value to the same endpoint while the set is unchanged;
 * requests without the value go round-robin.
 */
import type { BalanceMode } from './config.ts';
import { HashRing } from './hash-ring.ts';

export interface Picker {
  /** `key`: the request value a consistent hash is keyed by, when the request has one. */
  pick(candidates: readonly number[], active: (i: number) => number, key?: string): number;
}

export function createPicker(mode: BalanceMode, weights: readonly number[], random = Math.random): Picker {
  if (mode === 'least-request') return new LeastRequest(weights, random);
  if (mode === 'consistent-hash') return new ConsistentHash(weights);
  return new SmoothRoundRobin(weights);
}

/** The ring for keyed requests, the weighted rotation for the others. */
export class ConsistentHash implements Picker {
  private readonly ring: HashRing;
  private readonly rest: SmoothRoundRobin;
  private readonly allowed: boolean[];

  constructor(weights: readonly number[]) {
    this.ring = new HashRing(weights);
    this.rest = new SmoothRoundRobin(weights);
    this.allowed = weights.map(() => false);
  }

  pick(candidates: readonly number[], _active: (i: number) => number, key?: string): number {
    if (key === undefined || key === '') return this.rest.pick(candidates);
    if (candidates.length === 1) return candidates[0] as number;
    for (const i of candidates) this.allowed[i] = true;
    try {
      return this.ring.lookup(key, (i) => this.allowed[i] === true);
    } finally {
      for (const i of candidates) this.allowed[i] = false;
    }
  }
}

export class SmoothRoundRobin implements Picker {
  private readonly current: number[];

  constructor(private readonly weights: readonly number[]) {
    this.current = weights.map(() => 0);
  }

  pick(candidates: readonly number[]): number {
    let total = 0;
    let best = candidates[0] as number;
    for (const i of candidates) {
      const w = this.weights[i] as number;
      this.current[i] = (this.current[i] as number) + w;
      total += w;
      if ((this.current[i] as number) > (this.current[best] as number)) best = i;
    }
    this.current[best] = (this.current[best] as number) - total;
    return best;
  }
}

export class LeastRequest implements Picker {
  constructor(
    private readonly weights: readonly number[],
    private readonly random: () => number,
  ) {}

  pick(candidates: readonly number[], active: (i: number) => number): number {
    if (candidates.length === 1) return candidates[0] as number;
    const a = this.draw(candidates, -1);
    const b = this.draw(candidates, a);
    const load = (i: number) => active(i) / (this.weights[i] as number);
    return load(b) < load(a) ? b : a;
  }

  /** One candidate drawn with probability proportional to its weight, `except` left out. */
  private draw(candidates: readonly number[], except: number): number {
    let total = 0;
    for (const i of candidates) if (i !== except) total += this.weights[i] as number;
    let r = this.random() * total;
    let last = -1;
    for (const i of candidates) {
      if (i === except) continue;
      last = i;
      r -= this.weights[i] as number;
      if (r < 0) return i;
    }
    return last;
  }
}
