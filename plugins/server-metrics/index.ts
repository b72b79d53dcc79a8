/**
 * server-metrics: server-level metrics under a service-chosen prefix, for a service-wide
 * `pipeline:` (it then sees every routed request):
 *
 *   <prefix>_uptime_seconds               gauge    time since the service started
 *   <prefix>_connections_active           gauge    open client connections of the main listener
 *   <prefix>_connections_total            counter  connections accepted since start
 *   <prefix>_requests_total{status}       counter  `ok` (status < 400) or `error` (4xx, 5xx, or a thrown error)
 *   <prefix>_request_duration_seconds     histogram
 *
 * `error` counts every request that did not succeed, as clients see it (a refused query, a version
 * conflict, an internal failure alike), including those refused before any pipeline ran (Host or
 * Origin refused: 403, no route: 404/405, over `limits.max_concurrent`: 503), which no stage
 * sees: those are read from ServiceInfo.refusedRequests at scrape time. Server faults alone are
 * `switchyard_requests_total` with a 5xx `status`.
 * Connection figures come from ServiceInfo.connections at scrape time: nothing per request.
 */
import { definePlugin, type FromSchema, type JsonSchema, latencyBuckets } from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    prefix: {
      type: 'string',
      pattern: '^[a-zA-Z_][a-zA-Z0-9_]*$',
      default: 'switchyard_server',
      description: 'Metric name prefix, e.g. `db_server` gives `db_server_uptime_seconds`',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'server-metrics',
  description: 'Server metrics (uptime, connections, requests by ok/error, latency) under a chosen prefix',
  options: optionsSchema,
  create(options, env) {
    const prefix = options.prefix;
    // Metrics are get-or-create: the instances of every route (and of later reloads) share them,
    // and their collect functions read the same ServiceInfo.
    const service = env.service;
    env.metrics.gauge({
      name: `${prefix}_uptime_seconds`,
      help: 'Seconds since the service started',
      aggregator: 'max',
      collect() {
        this.set((Date.now() - service.startedAt.getTime()) / 1000);
      },
    });
    env.metrics.gauge({
      name: `${prefix}_connections_active`,
      help: 'Client connections open on the main listener',
      collect() {
        this.set(service.connections?.().active ?? 0);
      },
    });
    let counted = 0;
    env.metrics.counter({
      name: `${prefix}_connections_total`,
      help: 'Client connections accepted on the main listener since the service started',
      collect() {
        const total = service.connections?.().total ?? counted;
        if (total > counted) this.inc(total - counted);
        counted = total;
      },
    });
    let refusedCounted = service.refusedRequests ?? 0;
    const requests = env.metrics.counter({
      name: `${prefix}_requests_total`,
      help: 'Requests answered, by outcome: ok (status < 400) or error (4xx, 5xx, refused before routing included)',
      labelNames: ['status'] as const,
      collect() {
        const refused = service.refusedRequests ?? 0;
        if (refused > refusedCounted) this.labels('error').inc(refused - refusedCounted);
        refusedCounted = refused;
      },
    });
    const duration = env.metrics.histogram({
      name: `${prefix}_request_duration_seconds`,
      help: 'Time to answer a request, from the service-wide pipeline to its end',
      buckets: latencyBuckets,
    });
    // Bound children: no label object per request.
    const ok = requests.labels('ok');
    const error = requests.labels('error');

    return {
      async handle(ctx, next) {
        const started = process.hrtime.bigint();
        let failed = true;
        try {
          await next();
          failed = ctx.status >= 400;
        } finally {
          (failed ? error : ok).inc();
          duration.observe(Number(process.hrtime.bigint() - started) / 1e9);
        }
      },
      describe: () => ({ prefix }),
    };
  },
});
