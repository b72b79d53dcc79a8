/**
 * Metrics. Each service owns one prom-client registry, exposed on its metrics listener.
 * Metrics are get-or-create so that a hot reload (a new graph) keeps counting on the same series.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

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
  histogram<L extends string>(spec: MetricSpec<L> & { buckets?: number[] }): Histogram<L>;
}

export function createMetricsKit(registry = new Registry()): MetricsKit {
  function existing<T>(name: string): T | undefined {
    return registry.getSingleMetric(name) as T | undefined;
  }
  return {
    registry,
    counter(spec) {
      return existing(spec.name) ?? new Counter({ ...spec, labelNames: spec.labelNames ?? [], registers: [registry] });
    },
    gauge(spec) {
      return existing(spec.name) ?? new Gauge({ ...spec, labelNames: spec.labelNames ?? [], registers: [registry] });
    },
    histogram(spec) {
      return (
        existing(spec.name) ?? new Histogram({ ...spec, labelNames: spec.labelNames ?? [], registers: [registry] })
      );
    },
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
