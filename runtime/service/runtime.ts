/**
 * A running service: the coordinator of its parts, each doing one job —
 *
 * - listeners.ts: the main listener (HTTP or HTTPS, connection limits, upgrades) and the metrics
 *   and admin listeners; the main listener's requests run on the graph current at their arrival;
 * - reload.ts: hot reload as a transaction (load and validate the file, build and warm a whole
 *   new graph, then swap it in atomically; a config that fails to load or build changes nothing),
 *   and the data reload;
 * - drain.ts: which graph each request and response still uses; a replaced graph is closed once
 *   the requests and the responses still streaming their body (SSE) on it are done; the graceful
 *   stop;
 * - idle-trim.ts: the idle memory trim;
 * - status.ts: the config-status and health reports.
 *
 * This file starts them in order, swaps a reloaded graph in, and stops them in order.
 */
import type { Logger } from 'pino';
import { collectDefaultMetrics } from 'prom-client';
import { exposedListeners } from '../config/exposure.ts';
import { type LoadedService, type LoadOptions, loadService } from '../config/load.ts';
import { connectionCounters } from '../observability/connection-metrics.ts';
import { monitorEventLoop } from '../observability/event-loop.ts';
import { createLogger, flushLogger } from '../observability/logger.ts';
import { createMetricsKit, type MetricsKit } from '../observability/metrics.ts';
import type { HealthReport, ServiceInfo } from '../plugin.ts';
import { ConnectionTracker, connectionLimitsOf } from '../server/connections.ts';
import type { ConnectionSource, TlsMaterial } from '../server/listener.ts';
import { loadTlsMaterial } from '../server/tls.ts';
import { GraphDrain } from './drain.ts';
import { buildGraph, describeResources, type ServiceGraph } from './graph.ts';
import { type IdleTrim, idleTrimSettings, startIdleTrim, trimTargetsOf } from './idle-trim.ts';
import { ServiceListeners } from './listeners.ts';
import { loggingOptions } from './logging-options.ts';
import { type ReloadOutcome, ReloadTransaction, warmGraph } from './reload.ts';
import { serviceHealth, serviceStatus } from './status.ts';

export { loggingOptions } from './logging-options.ts';
export type { ReloadOutcome } from './reload.ts';

export interface ServiceRuntimeOptions extends LoadOptions {
  /** Use this logger instead of the one the config describes (tests). */
  logger?: Logger;
  /** How long start and reload wait for upstreams to become ready before going on. */
  warmupMs?: number;
  /**
   * `main` serves the main listener only: in a cluster worker, whose metrics and admin listeners
   * are the primary's (runtime/cluster.ts). Default `all`.
   */
  listeners?: 'all' | 'main';
  /** Cluster worker id, written on every log line as `worker`. */
  worker?: number;
  /** The main listener takes its connections from here instead of listening (a cluster worker). */
  acceptFrom?: ConnectionSource;
}

export class ServiceRuntime {
  graph: ServiceGraph;
  readonly info: ServiceInfo;
  /** The idle memory trim (idle-trim.ts). */
  idleTrim: IdleTrim | undefined;
  private readonly drain: GraphDrain;
  private readonly listeners: ServiceListeners;
  private readonly reloads: ReloadTransaction;
  private closing = false;
  /** Stops `switchyard_event_loop_delay_seconds`'s monitor (observability/event-loop.ts). */
  private stopLoopMonitor: (() => void) | undefined;

  private constructor(
    readonly file: string,
    readonly options: ServiceRuntimeOptions,
    readonly logger: Logger,
    readonly metrics: MetricsKit,
    graph: ServiceGraph,
    tls: TlsMaterial | undefined,
  ) {
    this.graph = graph;
    this.info = graph.info;
    const connections = new ConnectionTracker(
      connectionLimitsOf(graph.loaded.config.limits),
      connectionCounters(metrics),
    );
    this.info.connections = () => connections.snapshot();
    this.drain = new GraphDrain(() => this.graph);
    this.listeners = new ServiceListeners(this, options, connections, this.drain, tls);
    this.reloads = new ReloadTransaction(this);
  }

  static async start(file: string, options: ServiceRuntimeOptions = {}): Promise<ServiceRuntime> {
    const loaded = await loadService(file, options);
    const { config } = loaded;
    // `service` is in the logger's base; a child binding it again would write the key twice.
    const base =
      options.worker === undefined ? { service: config.service } : { service: config.service, worker: options.worker };
    // Read before anything starts: a missing certificate is a config error naming the field.
    const tls = loadTlsMaterial(config.listen.tls, loaded.configDir, loaded.file);
    const logger =
      options.logger ?? createLogger(loggingOptions(config.logging, loaded.configDir, options.worker), base);
    const metrics = createMetricsKit();
    metrics.registry.setDefaultLabels({ service: config.service });
    collectDefaultMetrics({ register: metrics.registry });
    const info: ServiceInfo = {
      name: config.service,
      version: config.version,
      configDir: loaded.configDir,
      ports: {},
      startedAt: new Date(),
      exposed: exposedListeners(config).length > 0,
    };
    const graph = await buildGraph(loaded, { logger, metrics, info });
    const runtime = new ServiceRuntime(loaded.file, options, logger, metrics, graph, tls);
    runtime.stopLoopMonitor = monitorEventLoop(metrics);
    info.reload = async () => {
      const outcome = await runtime.reload();
      return {
        ok: outcome.ok,
        error: outcome.error,
        problems: outcome.problems,
        resources: describeResources(runtime.graph),
      };
    };
    try {
      await warmGraph(graph, options.warmupMs, logger);
      await runtime.listeners.listen();
      runtime.idleTrim = runtime.startIdleTrim();
    } catch (err) {
      await runtime.close();
      throw err;
    }
    logger.info({ ports: info.ports, hash: loaded.hash }, `service ${config.service} started`);
    return runtime;
  }

  private startIdleTrim(): IdleTrim {
    return startIdleTrim(
      {
        settings: () => idleTrimSettings(this.graph),
        busy: () => this.drain.anyBusy(),
        requestsSeen: () => this.listeners.requestsSeen,
        trimTargets: () => trimTargetsOf(this.graph),
      },
      this.metrics,
      this.logger,
    );
  }

  /** The outcome of the last reload, for the config-status endpoint. */
  get lastReload(): ReloadOutcome | undefined {
    return this.reloads.last;
  }

  /** Reloads the config file (reload.ts). Concurrent calls share one reload. */
  reload(): Promise<ReloadOutcome> {
    return this.reloads.run();
  }

  /** Re-reads the data of the running graph's parts, without rebuilding it (reload.ts). */
  reloadData(): ReturnType<ReloadTransaction['data']> {
    return this.reloads.data();
  }

  /**
   * The reload's swap: the new graph serves new requests from now on, the old one is closed once
   * what still uses it is done (within the new graph's drain timeout), the connection limits
   * follow, and the main listener takes renewed certificate files.
   */
  swap(graph: ServiceGraph, loaded: LoadedService, tls: TlsMaterial | undefined): void {
    const old = this.graph;
    this.graph = graph;
    this.drain.retire(old, graph.loaded.config.limits.drain_timeout_ms);
    this.listeners.connections.setLimits(connectionLimitsOf(loaded.config.limits));
    if (tls && this.listeners.servesTls) this.listeners.renewTls(tls);
  }

  /**
   * Graceful stop (drain.ts): answers not started say `Connection: close`, the listeners stop
   * accepting, what is in flight on the current graph and on replaced ones finishes up to
   * `limits.drain_timeout_ms`, what is left is answered 503; then every graph closes.
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.idleTrim?.stop();
    await this.drain.stop(this.listeners, this.graph.loaded.config.limits.drain_timeout_ms, this.logger);
    await this.drain.closeGraphs();
    this.stopLoopMonitor?.();
    await this.listeners.shutdownTracing();
    this.logger.info('service stopped');
    await flushLogger(this.logger);
  }

  /** Health of everything in the current graph, for the admin listener. */
  health(): Promise<{ ok: boolean; checks: Record<string, HealthReport> }> {
    return serviceHealth(this.graph);
  }

  /** What is running now, for the config-status endpoint. */
  status(): Record<string, unknown> {
    return serviceStatus(this, this.drain, this.lastReload);
  }
}
