/**
 * A histogram whose observation costs a bucket search and three additions. prom-client's
 * Histogram hashes the label object of every observation (a string of the sorted names and
 * values, ~570 ns), and several observations go with every request (its duration, the gateway's
 * overhead, the upstream's latency, a stage's score); the metrics kit's queue only moved that
 * work to a flush. Here a series is found by its label values through nested maps, and a child
 * (`labels(...)`, kept by labelledSeries) holds its series.
 *
 * It is read through prom-client's registry like any metric: `get()` and `getForPromString()`
 * answer in prom-client's histogram format, so the text exposition, the JSON a cluster primary
 * sums (AggregatorRegistry) and promtool see what a prom-client Histogram fed the same
 * observations would give (test/runtime/histogram.test.ts holds the two to each other). As the
 * kit did, a wrong label or a value that is not a finite number is dropped with a warning, never
 * thrown at the caller.
 */
import type { Registry } from 'prom-client';

/** prom-client's default buckets. */
const defaultBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const metricName = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const labelName = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

type LabelValues<L extends string> = Partial<Record<L, string | number>>;

interface Series {
  /** The labels as first given (prom-client writes a series' labels in that order). */
  labels: Record<string, string | number>;
  /** Observations per bucket (not cumulative); the last slot: above every bound. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export interface HistogramChild {
  observe(value: number): void;
  /** Starts a timer; calling the result observes the seconds since (and returns them). */
  startTimer(): () => number;
}

/** A value of prom-client's metric format (what `get()` answers for each line). */
interface MetricValue {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string | number>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

export class Histogram<L extends string = string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly upperBounds: readonly number[];
  /** Series by their label values (as strings), one map level per label name, in labelNames order. */
  #root = new Map<string, unknown>();
  #series: Series[] = [];

  constructor(spec: { name: string; help: string; labelNames?: readonly L[]; buckets?: number[] }, registry: Registry) {
    if (!metricName.test(spec.name)) throw new Error(`Invalid metric name: ${spec.name}`);
    const names = spec.labelNames ?? [];
    for (const n of names) {
      if (!labelName.test(n)) throw new Error(`Invalid label name: ${n}`);
      if (n === 'le') throw new Error('le is a reserved label keyword');
    }
    const buckets = [...(spec.buckets ?? defaultBuckets)];
    for (let i = 1; i < buckets.length; i++) {
      if ((buckets[i] as number) <= (buckets[i - 1] as number)) throw new Error('Buckets must be sorted ascending');
    }
    this.name = spec.name;
    this.help = spec.help;
    this.labelNames = names;
    this.upperBounds = buckets;
    // A histogram without labels shows its (zero) series from the start, as prom-client's does.
    if (names.length === 0) this.#seriesOf({});
    registry.registerMetric(this as never);
  }

  observe(labelsOrValue: LabelValues<L> | number, value?: number): void {
    if (typeof labelsOrValue === 'number') this.#observe({}, labelsOrValue);
    else this.#observe(labelsOrValue ?? {}, value as number);
  }

  /** The child of one series: its label values in labelNames order, or a label object. */
  labels(...values: Array<string | number> | [LabelValues<L>]): HistogramChild {
    const first = values[0];
    const labels: Record<string, string | number> =
      typeof first === 'object' && first !== null
        ? { ...(first as Record<string, string | number>) }
        : Object.fromEntries(this.labelNames.map((n, i) => [n, values[i] as string | number]));
    const valid = this.#valid(labels);
    // Made at its first observation, as prom-client's (a child alone shows no series).
    let series: Series | undefined;
    const observe = (v: number) => {
      if (!valid) this.#drop('wrong labels');
      else if (!Number.isFinite(v)) this.#drop(`value ${v} is not a finite number`);
      else {
        series ??= this.#seriesOf(labels);
        add(series, this.upperBounds, v);
      }
    };
    return {
      observe,
      startTimer: () => {
        const started = process.hrtime.bigint();
        return () => {
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          observe(seconds);
          return seconds;
        };
      },
    };
  }

  /** Starts a timer; calling the result observes the seconds since with the labels of both calls. */
  startTimer(labels?: LabelValues<L>): (endLabels?: LabelValues<L>) => number {
    const started = process.hrtime.bigint();
    return (endLabels) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.#observe({ ...labels, ...endLabels }, seconds);
      return seconds;
    };
  }

  reset(): void {
    this.#root = new Map();
    this.#series = [];
  }

  async get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: string }> {
    const data = await this.getForPromString();
    // Flattened, as prom-client's get() gives them: `le` first, then the series' labels.
    data.values = data.values.map(({ labels, sharedLabels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }));
    return data;
  }

  async getForPromString(): Promise<{
    name: string;
    help: string;
    type: string;
    values: MetricValue[];
    aggregator: string;
  }> {
    const values: MetricValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.#series) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += s.counts[i] as number;
        values.push({ labels: { le }, sharedLabels: s.labels, value: cumulative, metricName: bucket, exemplar: null });
      });
      values.push({
        labels: { le: '+Inf' },
        sharedLabels: s.labels,
        value: s.count,
        metricName: bucket,
        exemplar: null,
      });
      // exemplar as prom-client leaves it on these (undefined, not null)
      values.push({
        labels: {},
        sharedLabels: s.labels,
        value: s.sum,
        metricName: `${this.name}_sum`,
        exemplar: undefined,
      });
      values.push({
        labels: {},
        sharedLabels: s.labels,
        value: s.count,
        metricName: `${this.name}_count`,
        exemplar: undefined,
      });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  #observe(labels: Record<string, string | number | undefined>, value: number): void {
    if (!this.#valid(labels)) this.#drop('wrong labels');
    else if (!Number.isFinite(value)) this.#drop(`value ${value} is not a finite number`);
    else add(this.#seriesOf(labels as Record<string, string | number>), this.upperBounds, value);
  }

  /** Only names the histogram has (some may be left out, as prom-client allows). */
  #valid(labels: Record<string, unknown>): boolean {
    for (const n in labels) if (!(this.labelNames as readonly string[]).includes(n)) return false;
    return true;
  }

  /** The series of `labels` (valid), made on first use. */
  #seriesOf(labels: Record<string, string | number | undefined>): Series {
    let node: Map<string, unknown> = this.#root;
    const names = this.labelNames;
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      const key = keyOf(labels[names[i] as string]);
      let next = node.get(key) as Map<string, unknown> | undefined;
      if (!next) {
        next = new Map();
        node.set(key, next);
      }
      node = next;
    }
    const key = last < 0 ? '' : keyOf(labels[names[last] as string]);
    let series = node.get(key) as Series | undefined;
    if (!series) {
      const own: Record<string, string | number> = {};
      for (const n in labels) if (labels[n] !== undefined) own[n] = labels[n] as string | number;
      series = { labels: own, counts: new Float64Array(this.upperBounds.length + 1), sum: 0, count: 0 };
      node.set(key, series);
      this.#series.push(series);
    }
    return series;
  }

  #drop(why: string): void {
    process.emitWarning(`metric ${this.name}: update dropped: ${why}`);
  }
}

/** A label value as its series key: absent is its own key; 7 and "7" are one series, as in prom-client. */
function keyOf(value: string | number | undefined): string {
  return value === undefined ? '\u0000absent' : String(value);
}

function add(series: Series, bounds: readonly number[], value: number): void {
  let i = 0;
  while (i < bounds.length && value > (bounds[i] as number)) i++;
  series.counts[i] = (series.counts[i] as number) + 1;
  series.sum += value;
  series.count += 1;
}
