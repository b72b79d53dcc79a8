/**
 * The primary's `GET /metrics`: every worker's registry (asked as JSON over IPC) summed with
 * prom-client's AggregatorRegistry.aggregate (counters and histograms add up, gauges too, except
 * those declaring another aggregator), plus the primary's own cluster gauges and counters.
 */
import { AggregatorRegistry } from 'prom-client';
import type { MetricsKit } from '../observability/metrics.ts';

/** The sum of the workers' registries (`parts`, those that answered) and the primary's `kit`. */
export async function aggregateMetrics(
  kit: MetricsKit,
  answered: number,
  parts: object[],
): Promise<{ contentType: string; text: string }> {
  workersGauge(kit).set(answered);
  const all = [...parts, await kit.registry.getMetricsAsJSON()];
  const registry = AggregatorRegistry.aggregate(all);
  return { contentType: registry.contentType, text: await registry.metrics() };
}

function workersGauge(kit: MetricsKit) {
  return kit.gauge({ name: 'switchyard_cluster_workers', help: 'Cluster workers answering (serve --workers)' });
}

export function restartsCounter(kit: MetricsKit) {
  return kit.counter({
    name: 'switchyard_cluster_worker_restarts_total',
    help: 'Cluster workers restarted after dying',
  });
}
