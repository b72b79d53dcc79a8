/**
 * `switchyard serve --workers N`: one host, several cores. A node:cluster primary forks N
 * workers; each worker runs every service of the command line (a Gateway). The primary accepts
 * the main listeners' connections and hands each to the next worker (round-robin), stopping in
 * an order that resets none (runtime/cluster-connections.ts). The metrics and admin listeners
 * run in the primary only. The primary's jobs, one unit each, coordinated here:
 *
 * - cluster/ipc.ts: the messages and request/reply calls between the primary and its workers;
 * - cluster/supervisor.ts: forking the workers, forking again (after a backoff) one that dies,
 *   asking every ready worker, stopping them;
 * - cluster/metrics.ts: `GET /metrics` answers the sum of every worker's registry, plus the
 *   primary's own cluster gauges;
 * - cluster/admin.ts: `POST /admin/reload` reloads the service in every worker and answers ok only
 *   if every worker reloaded; `GET /admin/config` and `GET /admin/health` show every worker;
 * - cluster/signals.ts: SIGHUP reloads every service in every worker; SIGTERM / SIGINT drain
 *   every worker and stop; `--watch` reloads a service whose config changed.
 *
 * The workers' side is cluster/worker.ts. Log lines carry `worker` (the cluster worker id; 0 is
 * the primary).
 */
import cluster from 'node:cluster';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { ClusterAdmin, type ClusterReloadOutcome } from './cluster/admin.ts';
import { aggregateMetrics, restartsCounter } from './cluster/metrics.ts';
import { handlePrimarySignals, watchConfigs } from './cluster/signals.ts';
import { WorkerSupervisor } from './cluster/supervisor.ts';
import { ConnectionDispatch } from './cluster-connections.ts';
import { type LoadedService, loadService } from './config/load.ts';
import { createLogger } from './observability/logger.ts';
import { createMetricsKit, type MetricsKit } from './observability/metrics.ts';
import { createAdminApp } from './server/admin.ts';
import { createListener, metricsEndpoint, startListener } from './server/listener.ts';
import { loggingOptions } from './service/logging-options.ts';
import type { ConfigWatcher } from './service/watch.ts';

export { runWorker } from './cluster/worker.ts';

export interface ClusterOptions {
  set?: string[];
  workers: number;
  watch?: boolean;
  /** Logger of the primary (default: from the first service's `logging`, with `worker: 0`). */
  logger?: Logger;
}

export interface ClusterServiceInfo {
  name: string;
  ports: { main?: number; metrics?: number; admin?: number };
  /** Hosts the primary's metrics and admin listeners bind. */
  hosts: { metrics?: string; admin?: string };
}

export class ClusterPrimary {
  readonly services: ClusterServiceInfo[] = [];
  private readonly servers: Server[] = [];
  private watchers: ConfigWatcher[] = [];
  private readonly metrics: MetricsKit[] = [];
  /** Per service: its main listener, which hands connections to the workers. */
  private readonly dispatch: ConnectionDispatch[] = [];
  private readonly supervisor: WorkerSupervisor;
  private readonly admin: ClusterAdmin;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly loaded: LoadedService[],
    options: ClusterOptions,
    readonly logger: Logger,
  ) {
    this.supervisor = new WorkerSupervisor(
      {
        mainPorts: () => this.services.map((s) => s.ports.main),
        dispatch: this.dispatch,
        restarted: () => {
          for (const kit of this.metrics) restartsCounter(kit).inc();
        },
        reloadEverywhere: (i) => this.reloadService(i),
      },
      logger,
    );
    this.admin = new ClusterAdmin(
      this.supervisor,
      (i) => this.services[i]?.name,
      (i) => this.services[i]?.ports,
      options.workers,
      logger,
    );
  }

  /**
   * Validates every config (a bad one stops here, before any fork), starts the metrics and admin
   * listeners, forks the workers and waits until each one serves every service.
   */
  static async start(files: string[], options: ClusterOptions): Promise<ClusterPrimary> {
    if (!cluster.isPrimary) throw new Error('ClusterPrimary.start runs in the primary process');
    const loaded: LoadedService[] = [];
    for (const file of files) loaded.push(await loadService(file, { set: options.set }));
    const first = loaded[0]?.config;
    if (!first) throw new Error('no service to run');
    // The primary's own lines go to the file the config names (resolved as the workers resolve it).
    const logger =
      options.logger ??
      createLogger(loggingOptions(first.logging, loaded[0]?.configDir ?? '.', undefined), { worker: 0 });
    const primary = new ClusterPrimary(loaded, options, logger);
    try {
      await primary.listen();
      await primary.supervisor.forkAll(options.workers);
    } catch (err) {
      await primary.close();
      throw err;
    }
    if (options.watch) {
      primary.watchers = watchConfigs(
        loaded.map((l) => l.file),
        (i) => primary.services[i]?.name,
        (i) => primary.reloadService(i),
        logger,
      );
    }
    logger.info({ workers: options.workers, services: primary.services.map((s) => s.name) }, 'cluster started');
    return primary;
  }

  private async listen(): Promise<void> {
    for (const [i, { config }] of this.loaded.entries()) {
      const info: ClusterServiceInfo = {
        name: config.service,
        ports: {},
        hosts: { metrics: config.metrics?.host, admin: config.admin?.host },
      };
      this.services.push(info);
      const kit = createMetricsKit();
      kit.registry.setDefaultLabels({ service: config.service });
      this.metrics.push(kit);
      const keepAlive = config.limits.keep_alive_timeout_ms;
      const dispatch = new ConnectionDispatch(i, config.limits.max_connections);
      this.dispatch.push(dispatch);
      info.ports.main = await dispatch.listen(config.listen.host, config.listen.port);
      if (config.metrics && config.metrics.enabled !== false) {
        const handler = metricsEndpoint(config.metrics.path, () => this.clusterMetrics(i));
        info.ports.metrics = await this.serve(
          createListener(handler, keepAlive),
          config.metrics.host,
          config.metrics.port,
        );
      }
      if (config.admin) {
        const app = createAdminApp(this.admin.target(i), config.admin.token);
        info.ports.admin = await this.serve(
          createListener(app.callback(), keepAlive),
          config.admin.host,
          config.admin.port,
        );
      }
    }
    this.supervisor.listen();
  }

  private serve(server: Server, host: string, port: number): Promise<number> {
    this.servers.push(server);
    return startListener(server, host, port);
  }

  /** Service `i`'s metrics: every ready worker's registry summed, with the primary's own. */
  private async clusterMetrics(i: number): Promise<{ contentType: string; text: string }> {
    const answers = await this.supervisor.ask<object[]>('metrics', i);
    const parts = answers.flatMap(({ result }) => (result.status === 'fulfilled' ? [result.value] : []));
    return aggregateMetrics(this.metrics[i] as MetricsKit, answers.length, parts);
  }

  /** Reloads service `i` in every worker; ok only if every worker reloaded. */
  reloadService(i: number): Promise<ClusterReloadOutcome> {
    return this.admin.reload(i);
  }

  reloadAll(): Promise<unknown[]> {
    return Promise.all(this.services.map((_, i) => this.reloadService(i)));
  }

  /** True once close() was called. */
  get stopping(): boolean {
    return this.closing !== undefined;
  }

  /**
   * Stops accepting connections, drains every worker (each stops as on SIGTERM), then closes the
   * primary's other listeners.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      // First: a worker finishes its drain only once told that no more connections come. The
      // workers are told to stop only once the listening sockets are closed: a stopping worker
      // answers with Connection: close, and its clients reconnecting at once while the listener
      // closes are the ones a close can reset (server/plug-close.ts); closing takes one accept
      // queue's worth of connections, at most the plug's 2 s.
      const closed = await Promise.all(this.dispatch.map((d) => d.close()));
      // Anything but 'plug accepted' (Linux) may have reset a client queued at the close.
      // The plug's window (ms): a client that connected within it was reset (server/plug-close.ts).
      const window = this.dispatch.map((d) => d.plugWindowMs);
      this.logger.info({ listeners: closed, plug_window_ms: window }, 'listening sockets closed');
      for (const w of this.watchers) w.close();
      this.supervisor.stopRestarting();
      await this.supervisor.stopAll(Math.max(...this.loaded.map((l) => l.config.limits.drain_timeout_ms)));
      for (const s of this.servers) s.closeAllConnections();
      await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(resolve))));
      // Connections the primary accepted and closed instead of handing on (none in a clean stop).
      this.logger.info({ dropped: this.dispatch.map((d) => d.dropped) }, 'cluster stopped');
      this.logger.flush?.();
    })();
    return this.closing;
  }

  /** SIGHUP reloads every worker; SIGTERM/SIGINT drain them and stop (a second signal exits at once). */
  handleSignals(exit: (code: number) => void = process.exit): void {
    handlePrimarySignals(this, exit);
  }
}
