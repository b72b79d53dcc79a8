/**
 * Metrics. Each service owns one prom-client registry, exposed on its metrics listener.
 * Metrics are get-or-create so that a hot reload (a new graph) keeps counting on the same series.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { Histogram } from './histogram.ts';

export interface MetricSpec<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

export interface MetricsKit {
  registry: Registry;
  /** `collect` runs at each scrape, e.g. to add what an outside count grew by since the last one. */
  counter<L extends string>(spec: MetricSpec<L> & { collect?: (this: Counter<L>) => void | Promise<void> }): Counter<L>;
  /** `aggregator`: how a cluster primary combines the workers' values (prom-client; default `sum`). */
  gauge<L extends string>(
    spec: MetricSpec<L> & {
      collect?: (this: Gauge<L>) => void | Promise<void>;
      aggregator?: 'sum' | 'first' | 'min' | 'max' | 'average' | 'omit';
    },
  ): Gauge<L>;
  /** Our own histogram (histogram.ts), read through the registry like prom-client's. */
  histogram<L extends string>(spec: MetricSpec<L> & { buckets?: number[] }): Histogram<L>;
}

export function createMetricsKit(registry = new Registry()): MetricsKit {
  function existing<T>(name: string): T | undefined {
    return registry.getSingleMetric(name) as T | undefined;
  }
  return {
    registry,
    counter(spec) {
      return (
        existing(spec.name) ??
        deferUpdates(new Counter({ ...spec, labelNames: spec.labelNames ?? [], registers: [registry] }))
      );
    },
    gauge(spec) {
      return existing(spec.name) ?? new Gauge({ ...spec, labelNames: spec.labelNames ?? [], registers: [registry] });
    },
    histogram(spec) {
      // Our own (histogram.ts): an observation hashes no labels, so it is applied at once.
      return existing(spec.name) ?? new Histogram(spec, registry);
    },
  };
}

/** Updates queued before a batch is applied (a few requests' worth: they die young). */
const batchSize = 256;
/** Counter series whose sums are kept between flushes (found again without a label hash). */
const keptSeries = 4096;

/**
 * Makes a counter's `inc(labels, n)` queue the update and apply the queue in one go: every
 * `batchSize` updates, and before every read (prom-client's `get()` runs `collect` first: scrapes,
 * cluster aggregation and tests see every update). Applied one at a time on the request path, each
 * update hashes its labels in code the CPU has not run for a while; in a batch that code runs hot,
 * and increments of one series are summed first (one update per series). Increments commute, so
 * applying them later changes no total; gauges (whose `set` does not) stay immediate. Histograms
 * are our own (histogram.ts), cheap enough to apply at once.
 */
function deferUpdates(metric: Counter<string>): Counter<string> {
  type Labels = Record<string, string | number> | undefined;
  const target = metric as unknown as Record<string, unknown> & { name: string; collect?: () => unknown };
  const update = (target.inc as (labelsOrValue?: Labels | number, value?: number) => unknown).bind(metric);
  const labelsQueue: Labels[] = [];
  const values: Array<number | undefined> = [];
  /**
   * A counter's increments, summed per series until a flush: one prom-client update (one label
   * hash) per series and flush instead of one per increment. A child's (`labels()`) unit
   * increments are summed on the child; a label object's series is found by its values in
   * `labelNames` order through nested maps (no key string per increment), and an object with
   * other labels than the counter's goes to the queue, where prom-client refuses it as it would.
   */
  const labelNames = (target as unknown as { labelNames: string[] }).labelNames;
  type Sum = { labels: Record<string, string | number>; sum: number };
  const sums = labelNames.length > 0 ? new Map<unknown, unknown>() : undefined;
  /** The series with a sum pending (each once). */
  const summed: Sum[] = [];
  /** Series kept in `sums`: dropped (at a flush) past `keptSeries`, label values may come from requests. */
  let seriesKept = 0;
  const sumInto = (labels: Record<string, string | number>, value: number): boolean => {
    let count = 0;
    for (const _ in labels) count++;
    if (count !== labelNames.length) return false;
    let node = sums as Map<unknown, unknown>;
    const last = labelNames.length - 1;
    for (let i = 0; i < last; i++) {
      const v = labels[labelNames[i] as string];
      if (v === undefined) return false;
      let next = node.get(v) as Map<unknown, unknown> | undefined;
      if (!next) {
        next = new Map();
        node.set(v, next);
      }
      node = next;
    }
    const v = labels[labelNames[last] as string];
    if (v === undefined) return false;
    let pending = node.get(v) as Sum | undefined;
    if (!pending) {
      pending = { labels, sum: 0 };
      node.set(v, pending);
      seriesKept++;
    }
    if (pending.sum === 0) summed.push(pending);
    pending.sum += value;
    // Bounded like the queue: series of unbounded label values still flush in batches.
    if (summed.length >= batchSize) flush();
    return true;
  };
  const flush = () => {
    for (const pending of summed) {
      const n = pending.sum;
      pending.sum = 0;
      try {
        update(pending.labels, n);
      } catch (err) {
        process.emitWarning(`metric ${target.name}: update dropped: ${(err as Error).message}`);
      }
    }
    summed.length = 0;
    if (sums && seriesKept > keptSeries) {
      sums.clear();
      seriesKept = 0;
    }
    const n = labelsQueue.length;
    for (let i = 0; i < n; i++) {
      try {
        const labels = labelsQueue[i];
        if (labels === undefined) update(values[i]);
        else update(labels, values[i]);
      } catch (err) {
        // A wrong label or value is a programming error; it must not fail whatever flushes.
        process.emitWarning(`metric ${target.name}: update dropped: ${(err as Error).message}`);
      }
    }
    labelsQueue.length = 0;
    values.length = 0;
  };
  target.inc = (labels?: Labels | number, value?: number) => {
    if (typeof labels === 'object' && labels !== null) {
      // An increment of a counter (one, or a finite amount ≥ 0: anything else is left for
      // prom-client to refuse) is summed into its series.
      if (sums && (value === undefined || (value > 0 && Number.isFinite(value))) && sumInto(labels, value ?? 1)) return;
      labelsQueue.push(labels);
      values.push(value);
    } else {
      labelsQueue.push(undefined);
      values.push(labels);
    }
    if (labelsQueue.length >= batchSize) flush();
  };
  // A child (`labels(...)`) queues its updates too, its label object made once: a caller that
  // keeps its children (labelledSeries) pays neither the label object nor the check per update.
  // Wrong labels are dropped with a warning when applied, as a label object's are.
  const ownLabels = (target.labels as (...args: unknown[]) => Record<string, unknown>).bind(metric);
  target.labels = (...args: unknown[]) => {
    const child = ownLabels(...args);
    const labels: Record<string, string | number> =
      typeof args[0] === 'object' && args[0] !== null
        ? { ...(args[0] as Record<string, string | number>) }
        : Object.fromEntries(labelNames.map((name, i) => [name, args[i] as string | number]));
    // A counter child's `inc()` (by one, the usual call) only counts: integer sums are exact, and a
    // counter's increments commute, so one update of n at the flush adds what n updates of one did.
    const pending: Sum = { labels, sum: 0 };
    const queued = (value?: number) => {
      if (value === undefined) {
        if (pending.sum++ === 0) summed.push(pending);
        return;
      }
      labelsQueue.push(labels);
      values.push(value);
      if (labelsQueue.length >= batchSize) flush();
    };
    return { ...child, inc: queued };
  };
  // After the metric's own collect, which may itself add (e.g. what an outside count grew by).
  const own = target.collect;
  target.collect = function (this: Counter<string>) {
    const done = own?.call(this);
    if (done instanceof Promise) return done.then(flush);
    flush();
  };
  return metric;
}

/**
 * The children of a labelled counter or histogram, each made once per combination of label values
 * (in `labelNames` order) and kept: an update through one makes no label object and checks nothing.
 * For series whose values come from a small set (routes, methods, status codes, upstream names).
 */
export function labelledSeries<C>(metric: { labels(...values: string[]): C }): (...values: string[]) => C {
  const root = new Map<string, unknown>();
  return (...values: string[]): C => {
    let node = root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      const key = values[i] as string;
      let next = node.get(key) as Map<string, unknown> | undefined;
      if (!next) {
        next = new Map();
        node.set(key, next);
      }
      node = next;
    }
    const key = values[last] as string;
    let child = node.get(key) as C | undefined;
    if (child === undefined) {
      child = metric.labels(...values);
      node.set(key, child);
    }
    return child;
  };
}

/** Buckets in seconds suited to gateway latencies (100 µs .. 30 s). */
export const latencyBuckets = [
  0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/** `switchyard_requests_total{route,method,status}`: shared by the request core and upgrades. */
export function requestsCounter(kit: MetricsKit) {
  return kit.counter({
    name: 'switchyard_requests_total',
    help: 'Requests answered, by route, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
  });
}

/** `switchyard_stage_failures_total{stage,plugin,on_error}`: shared by pipelines and upgrades. */
export function stageFailuresCounter(kit: MetricsKit) {
  return kit.counter({
    name: 'switchyard_stage_failures_total',
    help: 'Internal failures of pipeline stages, by stage and declared failure mode',
    labelNames: ['stage', 'plugin', 'on_error'] as const,
  });
}
