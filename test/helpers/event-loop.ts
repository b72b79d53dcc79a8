/**
 * Reads `switchyard_event_loop_delay_seconds` (runtime/observability/event-loop.ts) from a
 * service's /metrics, and the loop delay over a window from two readings: the share of
 * observations at or under each bucket bound, and the p99 as the smallest bound holding 99%.
 */

export interface LoopDelayReading {
  /** Cumulative count per bucket bound (seconds; +Inf as Infinity). */
  buckets: Map<number, number>;
  count: number;
}

export async function readLoopDelay(metricsUrl: string): Promise<LoopDelayReading> {
  const text = await (await fetch(metricsUrl)).text();
  return parseLoopDelay(text);
}

export function parseLoopDelay(text: string): LoopDelayReading {
  const buckets = new Map<number, number>();
  let count = Number.NaN;
  for (const line of text.split('\n')) {
    const bucket = /^switchyard_event_loop_delay_seconds_bucket\{.*le="([^"]+)".*\} (\S+)$/.exec(line);
    if (bucket) buckets.set(bucket[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(bucket[1]), Number(bucket[2]));
    const total = /^switchyard_event_loop_delay_seconds_count(?:\{.*\})? (\S+)$/.exec(line);
    if (total) count = Number(total[1]);
  }
  if (buckets.size === 0 || Number.isNaN(count)) throw new Error('no switchyard_event_loop_delay_seconds in /metrics');
  return { buckets, count };
}

export interface LoopDelayWindow {
  /** Observations in the window (one per 10 ms of loop time, blocked time included). */
  count: number;
  /** Smallest bucket bound (seconds) at or under which 99% of the window's observations lie. */
  p99: number;
  /** Largest bucket bound reached (the bound of the highest non-empty bucket). */
  max: number;
}

export function loopDelayBetween(before: LoopDelayReading, after: LoopDelayReading): LoopDelayWindow {
  const count = after.count - before.count;
  const bounds = [...after.buckets.keys()].sort((a, b) => a - b);
  const within = (bound: number) => (after.buckets.get(bound) ?? 0) - (before.buckets.get(bound) ?? 0);
  const p99 = bounds.find((b) => within(b) >= 0.99 * count) ?? Number.POSITIVE_INFINITY;
  const max = bounds.find((b) => within(b) >= count) ?? Number.POSITIVE_INFINITY;
  return { count, p99, max };
}
