/**
 * `switchyard serve --workers N`: one host, several cores. A node:cluster primary forks N
 * workers; each worker runs every service of the command line (a Gateway). The primary accepts
 * the main listeners' connections and hands each to the next worker (round-robin), stopping in
 * an order that resets none (runtime/cluster-connections.ts). The metrics and admin listeners
 * run in the primary only:
 *
 * - `GET /metrics` asks every worker for its registry (JSON) and answers the sum
 *   (prom-client's AggregatorRegistry.aggregate: counters and histograms add up, gauges too,
 *   except those declaring another aggregator), plus the primary's own cluster gauges;
 * - `POST /admin/reload` reloads the service in every worker (each runs the transaction on its
 *   own graph) and answers ok only if every worker reloaded; `GET /admin/config` and
 *   `GET /admin/health` show every worker.
 *
 * SIGHUP to the primary reloads every service in every worker; SIGTERM / SIGINT drain every
 * worker and stop; a worker that dies is forked again after a backoff. Log lines carry `worker`
 * (the cluster worker id; 0 is the primary). Workers talk to the primary over the cluster's IPC
 * channel with the request/reply messages below.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import { ConnectionDispatch, type ConnectionMessage, handedConnections } from './cluster-connections.ts';
import { type LoadedService, loadService } from './config/load.ts';
import { Gateway } from './gateway.ts';
import { createLogger } from './observability/logger.ts';
import { createMetricsKit, type MetricsKit } from './observability/metrics.ts';
import { type AdminTarget, createAdminApp } from './server/admin.ts';
import { createListener, metricsEndpoint, startListener } from './server/listener.ts';
import { describeResources } from './service/graph.ts';
import { loggingOptions, type ReloadOutcome } from './service/runtime.ts';
import { type ConfigWatcher, watchConfig } from './service/watch.ts';
import { workersTagSecret } from './upstreams/session-tags.ts';

type Op = 'status' | 'reload' | 'health' | 'metrics' | 'reload-all';

type Message =
  | { sy: 'request'; id: number; op: Op; service: number }
  | { sy: 'reply'; id: number; value?: unknown; error?: string }
  | { sy: 'ready'; services: Array<{ name: string; ports: Record<string, number | undefined> }> }
  | { sy: 'failed'; error: string }
  | { sy: 'shutdown' }
  | ConnectionMessage;

/** Environment variable telling a worker the main listeners' ports (JSON array, in file order). */
const mainPortsVariable = 'SWITCHYARD_CLUSTER_MAIN_PORTS';

const callTimeoutMs: Record<Op, number> = {
  status: 5000,
  health: 10000,
  metrics: 5000,
  reload: 120000,
  'reload-all': 120000,
};

/** A restarted worker that lived less than this counts as a failed start (longer backoff). */
const healthyRunMs = 10000;
const maxBackoffMs = 30000;

function isMessage(m: unknown): m is Message {
  return typeof m === 'object' && m !== null && typeof (m as { sy?: unknown }).sy === 'string';
}

/** Request/reply calls over one IPC channel. */
class Calls {
  private next = 1;
  private pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();

  call(send: (m: Message) => void, op: Op, service: number): Promise<unknown> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${op} got no answer within ${callTimeoutMs[op]} ms`));
      }, callTimeoutMs[op]);
      this.pending.set(id, { resolve, reject, timer });
      try {
        send({ sy: 'request', id, op, service });
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err as Error);
      }
    });
  }

  settle(m: Extract<Message, { sy: 'reply' }>): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.error !== undefined) p.reject(new Error(m.error));
    else p.resolve(m.value);
  }

  failAll(reason: string): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new Error(reason));
      this.pending.delete(id);
    }
  }
}

/** Answers a request with `work`'s result, or its error message. */
async function reply(send: (m: Message) => void, id: number, work: () => unknown): Promise<void> {
  try {
    send({ sy: 'reply', id, value: await work() });
  } catch (err) {
    send({ sy: 'reply', id, error: (err as Error).message });
  }
}

// ---------------------------------------------------------------------------------------------
// Primary

export interface ClusterOptions {
  set?: string[];
  workers: number;
  watch?: boolean;
  /** Logger of the primary (default: from the first service's `logging`, with `worker: 0`). */
  logger?: Logger;
}

interface Slot {
  index: number;
  worker?: Worker;
  /** Workers of this slot that died soon after starting, in a row. */
  failures: number;
  startedAt: number;
  restartTimer?: NodeJS.Timeout;
  ready: boolean;
  calls: Calls;
}

export interface ClusterServiceInfo {
  name: string;
  ports: { main?: number; metrics?: number; admin?: number };
  /** Hosts the primary's metrics and admin listeners bind. */
  hosts: { metrics?: string; admin?: string };
}

export class ClusterPrimary {
  readonly services: ClusterServiceInfo[] = [];
  private readonly slots: Slot[] = [];
  private readonly servers: Server[] = [];
  private readonly watchers: ConfigWatcher[] = [];
  private readonly metrics: MetricsKit[] = [];
  /** Per service: its main listener, which hands connections to the workers. */
  private readonly dispatch: ConnectionDispatch[] = [];
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly loaded: LoadedService[],
    private readonly options: ClusterOptions,
    readonly logger: Logger,
  ) {}

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
      await primary.forkAll();
    } catch (err) {
      await primary.close();
      throw err;
    }
    if (options.watch) primary.watch();
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
        const app = createAdminApp(this.adminTarget(i), config.admin.token);
        info.ports.admin = await this.serve(
          createListener(app.callback(), keepAlive),
          config.admin.host,
          config.admin.port,
        );
      }
    }
    cluster.on('message', (worker, m: unknown) => this.onMessage(worker, m));
    cluster.on('exit', (worker, code, signal) => this.onExit(worker, code, signal));
  }

  private serve(server: Server, host: string, port: number): Promise<number> {
    this.servers.push(server);
    return startListener(server, host, port);
  }

  private async forkAll(): Promise<void> {
    cluster.setupPrimary({ serialization: 'advanced' });
    for (let index = 0; index < this.options.workers; index++) {
      this.slots.push({ index, failures: 0, startedAt: 0, ready: false, calls: new Calls() });
    }
    await Promise.all(this.slots.map((slot) => this.fork(slot)));
  }

  /** Forks the slot's worker; resolves when it serves, rejects if it fails to start. */
  private fork(slot: Slot): Promise<void> {
    const worker = cluster.fork({
      [mainPortsVariable]: JSON.stringify(this.services.map((s) => s.ports.main)),
      // Every worker tags MCP sessions alike (a session is served by any of them).
      ...workersTagSecret(),
    });
    slot.worker = worker;
    slot.ready = false;
    slot.startedAt = Date.now();
    return new Promise((resolve, reject) => {
      const onMessage = (m: unknown) => {
        if (!isMessage(m)) return;
        if (m.sy === 'ready') {
          slot.ready = true;
          for (const d of this.dispatch) d.add(worker);
          this.logger.info({ worker_id: worker.id, pid: worker.process.pid }, 'worker ready');
          done();
          resolve();
        } else if (m.sy === 'failed') {
          done();
          reject(new Error(`worker ${worker.id} failed to start: ${m.error}`));
        }
      };
      const onExit = (code: number | null) => {
        done();
        reject(new Error(`worker ${worker.id} exited while starting (code ${code})`));
      };
      const done = () => {
        worker.off('message', onMessage);
        worker.off('exit', onExit);
      };
      worker.on('message', onMessage);
      worker.once('exit', onExit);
    });
  }

  private slotOf(worker: Worker): Slot | undefined {
    return this.slots.find((s) => s.worker === worker);
  }

  private onMessage(worker: Worker, m: unknown): void {
    if (!isMessage(m)) return;
    const slot = this.slotOf(worker);
    if (!slot) return;
    if (m.sy === 'reply') slot.calls.settle(m);
    else if (m.sy === 'stop-accepting') this.dispatch[m.service]?.stopAccepting(worker);
    else if (m.sy === 'request' && m.op === 'reload-all') {
      // A reload asked from a worker (the reload-api stage): reload that service everywhere.
      void reply(
        (r) => {
          if (worker.isConnected()) worker.send(r);
        },
        m.id,
        () => this.reloadService(m.service),
      );
    }
  }

  private onExit(worker: Worker, code: number | null, signal: string | null): void {
    const slot = this.slotOf(worker);
    if (!slot) return;
    slot.calls.failAll(`worker ${worker.id} exited`);
    for (const d of this.dispatch) d.remove(worker);
    slot.worker = undefined;
    slot.ready = false;
    if (this.closing) return;
    const lived = Date.now() - slot.startedAt;
    slot.failures = lived < healthyRunMs ? slot.failures + 1 : 0;
    const delay = Math.min(maxBackoffMs, 250 * 2 ** slot.failures);
    for (const kit of this.metrics) restartsCounter(kit).inc();
    this.logger.error(
      { worker_id: worker.id, pid: worker.process.pid, code, signal, restart_in_ms: delay },
      'worker died; restarting it',
    );
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (this.closing) return;
      this.fork(slot).catch((err: Error) => this.logger.error({ err: err.message }, 'worker restart failed'));
    }, delay);
  }

  private readyWorkers(): Slot[] {
    return this.slots.filter((s) => s.ready && s.worker?.isConnected());
  }

  /** Runs `op` for service `i` on every ready worker, in slot order. */
  private async ask<T>(op: Op, i: number): Promise<Array<{ slot: Slot; result: PromiseSettledResult<T> }>> {
    const slots = this.readyWorkers();
    const results = await Promise.allSettled(
      slots.map((slot) => {
        const worker = slot.worker as Worker;
        return slot.calls.call((m) => worker.send(m), op, i) as Promise<T>;
      }),
    );
    return slots.map((slot, n) => ({ slot, result: results[n] as PromiseSettledResult<T> }));
  }

  private async clusterMetrics(i: number): Promise<{ contentType: string; text: string }> {
    const kit = this.metrics[i] as MetricsKit;
    const answers = await this.ask<object[]>('metrics', i);
    workersGauge(kit).set(answers.length);
    const parts = answers.flatMap(({ result }) => (result.status === 'fulfilled' ? [result.value] : []));
    parts.push(await kit.registry.getMetricsAsJSON());
    const registry = AggregatorRegistry.aggregate(parts);
    return { contentType: registry.contentType, text: await registry.metrics() };
  }

  /** Reloads service `i` in every worker; ok only if every worker reloaded. */
  async reloadService(i: number): Promise<ReloadOutcome & { workers: Array<Record<string, unknown>> }> {
    const answers = await this.ask<ReloadOutcome>('reload', i);
    const at = new Date().toISOString();
    const outcomes = answers.map(({ slot, result }) =>
      result.status === 'fulfilled'
        ? { worker_id: slot.worker?.id, ...result.value }
        : { worker_id: slot.worker?.id, ok: false, at, error: String((result.reason as Error).message) },
    );
    const failed = outcomes.find((o) => !o.ok);
    const first = failed ?? outcomes[0];
    if (!first) return { ok: false, at, error: 'no worker is running', workers: [] };
    const { worker_id: _, ...summary } = first;
    const workers = outcomes.map((o) => ({ worker_id: o.worker_id, ok: o.ok, hash: o.hash, error: o.error }));
    const name = this.services[i]?.name;
    if (failed) this.logger.error({ service: name, error: failed.error }, 'cluster reload failed in a worker');
    else this.logger.info({ service: name, hash: summary.hash, workers: workers.length }, 'cluster reloaded');
    return { ...summary, ok: !failed, workers };
  }

  reloadAll(): Promise<unknown[]> {
    return Promise.all(this.services.map((_, i) => this.reloadService(i)));
  }

  private adminTarget(i: number): AdminTarget {
    return {
      status: async () => {
        const answers = await this.ask<Record<string, unknown>>('status', i);
        const statuses = answers.flatMap(({ result }) => (result.status === 'fulfilled' ? [result.value] : []));
        const { worker_id: _w, pid: _p, ...base } = statuses[0] ?? { service: this.services[i]?.name };
        return {
          ...base,
          ports: { ...(base.ports as object), ...this.services[i]?.ports },
          in_flight: sum(statuses, 'in_flight'),
          open_responses: sum(statuses, 'open_responses'),
          cluster: { workers_configured: this.options.workers, workers_ready: statuses.length },
          workers: statuses.map((s) => ({
            worker_id: s.worker_id,
            pid: s.pid,
            config_hash: s.config_hash,
            loaded_at: s.loaded_at,
            in_flight: s.in_flight,
            open_responses: s.open_responses,
            last_reload: s.last_reload,
          })),
        };
      },
      reload: () => this.reloadService(i),
      health: async () => {
        const answers = await this.ask<{ ok: boolean; checks: Record<string, unknown> }>('health', i);
        const workers = answers.map(({ slot, result }) =>
          result.status === 'fulfilled'
            ? { worker_id: slot.worker?.id, ok: result.value.ok, checks: result.value.checks }
            : { worker_id: slot.worker?.id, ok: false, checks: {}, error: String((result.reason as Error).message) },
        );
        const allUp = workers.length === this.options.workers;
        return {
          ok: allUp && workers.every((w) => w.ok),
          checks: (workers.find((w) => !w.ok) ?? workers[0])?.checks ?? {},
          workers,
        };
      },
    };
  }

  private watch(): void {
    for (const [i, { file }] of this.loaded.entries()) {
      const watcher = watchConfig(
        file,
        (changed) => {
          this.logger.info({ service: this.services[i]?.name, changed }, 'config change seen: reloading every worker');
          void this.reloadService(i);
        },
        { onError: (err) => this.logger.warn({ err }, 'config watch failed; reload by SIGHUP or the admin API') },
      );
      this.watchers.push(watcher);
    }
  }

  /**
   * Stops accepting connections, drains every worker (each stops as on SIGTERM), then closes the
   * primary's other listeners.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      // First: a worker finishes its drain only once told that no more connections come.
      for (const d of this.dispatch) d.close();
      for (const w of this.watchers) w.close();
      for (const slot of this.slots) clearTimeout(slot.restartTimer);
      const drainMs = Math.max(...this.loaded.map((l) => l.config.limits.drain_timeout_ms));
      const exits = this.slots.flatMap((slot) => {
        const worker = slot.worker;
        if (!worker || worker.isDead()) return [];
        const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
        if (!slot.ready) {
          // Still starting: it does not listen for messages yet, and serves nothing to drain.
          worker.process.kill('SIGTERM');
        } else {
          try {
            worker.send({ sy: 'shutdown' } satisfies Message);
          } catch {
            worker.process.kill('SIGTERM');
          }
        }
        // A worker that does not stop in time (drain timeout plus a margin) is killed.
        const timer = setTimeout(() => worker.process.kill('SIGKILL'), drainMs + 10000);
        return [exited.finally(() => clearTimeout(timer))];
      });
      await Promise.all(exits);
      for (const s of this.servers) s.closeAllConnections();
      await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(resolve))));
      this.logger.info('cluster stopped');
      this.logger.flush?.();
    })();
    return this.closing;
  }

  /** SIGHUP reloads every worker; SIGTERM/SIGINT drain them and stop (a second signal exits at once). */
  handleSignals(exit: (code: number) => void = process.exit): void {
    process.on('SIGHUP', () => {
      void this.reloadAll();
    });
    const stop = () => {
      if (this.closing) return exit(1);
      void this.close().then(() => exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  }
}

function sum(items: Array<Record<string, unknown>>, key: string): number {
  return items.reduce((n, s) => n + (typeof s[key] === 'number' ? (s[key] as number) : 0), 0);
}

function workersGauge(kit: MetricsKit) {
  return kit.gauge({ name: 'switchyard_cluster_workers', help: 'Cluster workers answering (serve --workers)' });
}

function restartsCounter(kit: MetricsKit) {
  return kit.counter({
    name: 'switchyard_cluster_worker_restarts_total',
    help: 'Cluster workers restarted after dying',
  });
}

// ---------------------------------------------------------------------------------------------
// Worker

/**
 * Runs in a forked worker: starts every service (main listeners only, shared by the cluster),
 * then answers the primary's requests. Resolves once serving; on a start failure it tells the
 * primary and rejects.
 */
export async function runWorker(files: string[], options: { set?: string[] }): Promise<Gateway> {
  const worker = cluster.worker;
  if (!worker || !process.send) throw new Error('runWorker runs in a cluster worker');
  const send = (m: Message) => {
    if (process.connected) process.send?.(m);
  };
  // The main listeners' connections, from the primary (listening before the gateway starts: the
  // primary sends some only after 'ready', but their messages must never meet no listener).
  const ports = JSON.parse(process.env[mainPortsVariable] ?? '[]') as number[];
  const handed = handedConnections(ports, send);
  const onConnectionMessage = (m: unknown, handle: unknown) => handed.receive(m, handle);
  process.on('message', onConnectionMessage);
  process.on('disconnect', () => handed.primaryGone());
  let gateway: Gateway;
  try {
    gateway = await Gateway.start(files, {
      set: options.set,
      listeners: 'main',
      worker: worker.id,
      acceptFrom: handed.sources,
    });
  } catch (err) {
    // Wait until the message is out: the caller exits right after.
    await new Promise<void>((resolve) => {
      const m: Message = { sy: 'failed', error: (err as Error).message };
      setTimeout(resolve, 1000).unref();
      process.send?.(m, undefined, {}, () => resolve());
    });
    throw err;
  }
  const calls = new Calls();

  // A reload asked on this worker (the reload-api stage) goes through the primary to every worker.
  for (const [i, service] of gateway.services.entries()) {
    service.info.reload = async () => {
      const outcome = (await calls.call(send, 'reload-all', i)) as ReloadOutcome;
      return {
        ok: outcome.ok,
        error: outcome.error,
        problems: outcome.problems,
        resources: describeResources(service.graph),
      };
    };
  }

  const stop = (code: number) => {
    if (gateway.stopping) return;
    void gateway.close().then(() => process.exit(code));
  };
  process.on('message', (m: unknown) => {
    if (!isMessage(m)) return;
    if (m.sy === 'reply') calls.settle(m);
    else if (m.sy === 'shutdown') stop(0);
    else if (m.sy === 'request') {
      const service = gateway.services[m.service];
      void reply(send, m.id, () => {
        if (!service) throw new Error(`no service #${m.service}`);
        switch (m.op) {
          case 'status':
            return { ...service.status(), worker_id: worker.id, pid: process.pid };
          case 'reload':
            return service.reload();
          case 'health':
            return service.health();
          case 'metrics':
            return service.metrics.registry.getMetricsAsJSON();
          default:
            throw new Error(`unknown request ${m.op}`);
        }
      });
    }
  });
  // The primary is gone: stop serving.
  process.on('disconnect', () => stop(0));
  gateway.handleSignals();
  send({ sy: 'ready', services: gateway.services.map((s) => ({ name: s.info.name, ports: { ...s.info.ports } })) });
  return gateway;
}
