/**
 * Latency histogram with 1 µs buckets up to one second (exact percentiles where it matters) and
 * a sorted overflow list beyond it, so a slow tail is reported as measured, not clamped.
 */
const LIMIT_US = 1_000_000;

export class LatencyHistogram {
  private readonly buckets = new Uint32Array(LIMIT_US);
  private readonly overflow: number[] = [];
  private count = 0;
  private sum = 0;
  max = 0;

  record(us: number): void {
    const v = Math.max(0, Math.round(us));
    if (v < LIMIT_US) this.buckets[v]++;
    else this.overflow.push(v);
    this.count++;
    this.sum += v;
    if (v > this.max) this.max = v;
  }

  mean(): number {
    return this.count ? this.sum / this.count : 0;
  }

  /** The smallest recorded value at or below which p % of the samples lie, in µs. */
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < LIMIT_US; i++) {
      seen += this.buckets[i];
      if (seen >= rank) return i;
    }
    this.overflow.sort((a, b) => a - b);
    return this.overflow[rank - seen - 1] ?? this.max;
  }
}
