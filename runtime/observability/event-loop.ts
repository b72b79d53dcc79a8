/**
 * `switchyard_event_loop_delay_seconds`: a Prometheus histogram of the event loop's delay, so
 * that the loop budget (no request may hold the loop more than 50 ms) can be read from outside
 * as a p99 over any window: the share of observations in the `le="0.05"` bucket between two
 * scrapes (test/helpers/event-loop.ts).
 *
 * How it samples: a timer due every `resolutionMs` records how late it fired, the measure
 * `perf_hooks.monitorEventLoopDelay` takes natively. That monitor is not used directly because
 * its samples can only be taken out by `reset()`, which also forgets the interval in progress: a
 * block that starts right after a scrape (or a fold) is never recorded (seen: a 300 ms block
 * read as a 1 ms p99). prom-client's `nodejs_eventloop_lag_*` gauges have the same hole, and are
 * gauges over the time since the previous scrape (every scraper resets them for the others), with
 * no buckets to aggregate across workers or windows; they stay, as the default metrics.
 *
 * Coordinated omission: a loop held for 11 s yields one late tick among thousands of punctual
 * ones, which a p99 would never see. A tick late by d > R is therefore also recorded as the ticks
 * the blocked loop missed (d − R, d − 2R, …: what a request arriving then would have waited), as
 * HdrHistogram's `recordCorrectedValue` does. The histogram is time-weighted: about one
 * observation per 10 ms of wall time, and its p99 is the delay the loop exceeds 1% of the time.
 */
import type { MetricsKit } from './metrics.ts';

export const eventLoopDelayMetric = 'switchyard_event_loop_delay_seconds';

/** Seconds; 0.05 is the loop budget. */
export const eventLoopDelayBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Sampling period (also the correction step). */
const resolutionMs = 10;

/**
 * Starts sampling into the histogram on the kit's registry (one per service, as the registry is).
 * Returns the stop function (the service's close).
 */
export function monitorEventLoop(kit: MetricsKit): () => void {
  const histogram = kit.histogram({
    name: eventLoopDelayMetric,
    help: `Event loop delay in seconds, sampled every ${resolutionMs} ms, corrected for coordinated omission`,
    buckets: eventLoopDelayBuckets,
  });
  const resolution = resolutionMs / 1000;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const delay = Math.max(0, (now - last) / 1000 - resolution);
    last = now;
    histogram.observe(delay);
    for (let missed = delay - resolution; missed > 0; missed -= resolution) histogram.observe(missed);
  }, resolutionMs);
  timer.unref();
  return () => clearInterval(timer);
}
