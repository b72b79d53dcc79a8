/**
 * The last hour of queries, for `stats --queries`: sixty one-minute buckets, each with exact
 * totals and a log-scale duration histogram (5 % wide buckets), so p50/p95/p99 over the hour are
 * exact to within 5 % and memory stays bounded whatever the traffic.
 */
import type { QueryStats } from './api.ts';

const WINDOW_MINUTES = 60;
/** Durations below 10 µs share the first bucket. */
const BASE_MS = 0.01;
const GROWTH = Math.log(1.05);
/** Entity types tracked per minute; more distinct types in one minute are counted in totals only. */
const MAX_TYPES_PER_MINUTE = 1000;

interface Bucket {
  minute: number;
  total: number;
  errors: number;
  sumMs: number;
  /** Histogram: bucket index → count. */
  durations: Map<number, number>;
  types: Map<string, number>;
}

const bucketOf = (ms: number) => (ms <= BASE_MS ? 0 : Math.ceil(Math.log(ms / BASE_MS) / GROWTH));
const upperBound = (index: number) => BASE_MS * Math.exp(index * GROWTH);
const round3 = (n: number) => Math.round(n * 1000) / 1000;

export class QueryWindow {
  private readonly buckets: Array<Bucket | undefined> = new Array(WINDOW_MINUTES);

  constructor(private readonly now: () => number = Date.now) {}

  record(type: string, durationMs: number, failed: boolean): void {
    const minute = Math.floor(this.now() / 60_000);
    const slot = minute % WINDOW_MINUTES;
    let b = this.buckets[slot];
    if (!b || b.minute !== minute) {
      b = { minute, total: 0, errors: 0, sumMs: 0, durations: new Map(), types: new Map() };
      this.buckets[slot] = b;
    }
    b.total++;
    if (failed) b.errors++;
    b.sumMs += durationMs;
    const d = bucketOf(durationMs);
    b.durations.set(d, (b.durations.get(d) ?? 0) + 1);
    if (b.types.has(type) || b.types.size < MAX_TYPES_PER_MINUTE) b.types.set(type, (b.types.get(type) ?? 0) + 1);
  }

  stats(top = 10): QueryStats {
    const current = Math.floor(this.now() / 60_000);
    let total = 0;
    let errors = 0;
    let sumMs = 0;
    const durations = new Map<number, number>();
    const types = new Map<string, number>();
    for (const b of this.buckets) {
      if (!b || b.minute <= current - WINDOW_MINUTES) continue;
      total += b.total;
      errors += b.errors;
      sumMs += b.sumMs;
      for (const [k, n] of b.durations) durations.set(k, (durations.get(k) ?? 0) + n);
      for (const [k, n] of b.types) types.set(k, (types.get(k) ?? 0) + n);
    }
    const sorted = [...durations.entries()].sort((a, b) => a[0] - b[0]);
    const percentile = (p: number): number | null => {
      if (total === 0) return null;
      const rank = Math.ceil(p * total);
      let seen = 0;
      for (const [index, n] of sorted) {
        seen += n;
        if (seen >= rank) return round3(upperBound(index));
      }
      return null;
    };
    return {
      window_seconds: 3600,
      total,
      errors,
      avg_ms: total === 0 ? null : round3(sumMs / total),
      p50_ms: percentile(0.5),
      p95_ms: percentile(0.95),
      p99_ms: percentile(0.99),
      top_entities: [...types.entries()]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, top)
        .map(([entity, queries]) => ({ entity, queries })),
    };
  }
}
