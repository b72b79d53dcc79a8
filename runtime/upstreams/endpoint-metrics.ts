/**
 * Metrics of balanced upstreams: each endpoint's state (a gauge computed at scrape time from the
 * live upstreams, so a hot reload neither freezes nor duplicates a series), its active check's
 * verdict, ejections and retries.
 */
import type { MetricsKit } from '../observability/metrics.ts';
import type { EndpointState } from './endpoint-health.ts';

interface Source {
  readonly name: string;
  states(): Array<{ label: string; state: EndpointState; checkHealthy?: boolean }>;
}

export interface EndpointMetrics {
  ejected(upstream: string, endpoint: string): void;
  retried(upstream: string, reason: string): void;
  budgetExhausted(upstream: string): void;
  forget(source: Source): void;
}

/** The live balanced upstreams of each registry (one per service). */
const live = new WeakMap<object, Set<Source>>();

export function endpointMetrics(kit: MetricsKit, source: Source): EndpointMetrics {
  let sources = live.get(kit.registry);
  if (!sources) {
    const set = new Set<Source>();
    sources = set;
    live.set(kit.registry, set);
    const states = () => [...set].flatMap((s) => s.states().map((e) => ({ upstream: s.name, ...e })));
    kit.gauge({
      name: 'switchyard_upstream_endpoint_up',
      help: 'Whether an endpoint of a balanced upstream takes requests (1) or is down or ejected (0)',
      labelNames: ['upstream', 'endpoint'] as const,
      aggregator: 'max',
      collect() {
        this.reset();
        for (const e of states()) this.set({ upstream: e.upstream, endpoint: e.label }, e.state === 'up' ? 1 : 0);
      },
    });
    kit.gauge({
      name: 'switchyard_upstream_endpoint_ejected',
      help: 'Whether an endpoint of a balanced upstream is ejected now (1) after consecutive failures',
      labelNames: ['upstream', 'endpoint'] as const,
      aggregator: 'max',
      collect() {
        this.reset();
        for (const e of states()) this.set({ upstream: e.upstream, endpoint: e.label }, e.state === 'ejected' ? 1 : 0);
      },
    });
    kit.gauge({
      name: 'switchyard_upstream_endpoint_check_healthy',
      help: "An endpoint's active health check verdict: passing (1) or marked down after failures in a row (0)",
      labelNames: ['upstream', 'endpoint'] as const,
      aggregator: 'max',
      collect() {
        this.reset();
        for (const e of states()) {
          if (e.checkHealthy !== undefined)
            this.set({ upstream: e.upstream, endpoint: e.label }, e.checkHealthy ? 1 : 0);
        }
      },
    });
  }
  sources.add(source);
  const ejections = kit.counter({
    name: 'switchyard_upstream_ejections_total',
    help: 'Endpoints of a balanced upstream ejected after consecutive failures',
    labelNames: ['upstream', 'endpoint'] as const,
  });
  const retries = kit.counter({
    name: 'switchyard_upstream_retries_total',
    help: 'Requests tried again, by reason (connect_failure, reset, timeout, or the status retried)',
    labelNames: ['upstream', 'reason'] as const,
  });
  const refused = kit.counter({
    name: 'switchyard_upstream_retry_budget_exhausted_total',
    help: 'Retries not made because the retry budget was spent (the failed try stood)',
    labelNames: ['upstream'] as const,
  });
  const registered = sources;
  return {
    ejected: (upstream, endpoint) => ejections.inc({ upstream, endpoint }),
    retried: (upstream, reason) => retries.inc({ upstream, reason }),
    budgetExhausted: (upstream) => refused.inc({ upstream }),
    forget: (s) => registered.delete(s),
  };
}
