/**
 * A running service: its listeners (main, metrics, admin), its current graph, and hot reload as
 * a transaction — load and validate the file, build and warm a whole new graph, then swap it in
 * atomically. Requests already running finish on the graph they started on; the old graph is
 * closed once they are done — including the responses still streaming their body (SSE) after
 * the pipeline returned. A config that fails to load or build changes nothing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import { extname, resolve } from 'node:path';
import Koa from 'koa';
import type { Logger } from 'pino';
import { collectDefaultMetrics } from 'prom-client';
import { bodyNotInvited } from '../body.ts';
import { exposedListeners } from '../config/exposure.ts';
import { type LoadOptions, loadService } from '../config/load.ts';
import { ConfigError, type ConfigProblem } from '../config/source.ts';
import type { ServiceConfig } from '../config/types.ts';
import { injectDryRun } from '../dry-run.ts';
import { connectionCounters } from '../observability/connection-metrics.ts';
import { monitorEventLoop } from '../observability/event-loop.ts';
import {
  createLogger,
  flushLogger,
  LOG_FORMATS,
  type LogFormat,
  type LoggingOptions,
} from '../observability/logger.ts';
import { createMetricsKit, type MetricsKit } from '../observability/metrics.ts';
import { createTracing, type Tracing } from '../observability/tracing.ts';
import type { HealthReport, ServiceInfo } from '../plugin.ts';
import { drainAcceptQueue } from '../server/accept-backlog.ts';
import { createAdminApp } from '../server/admin.ts';
import { ConnectionTracker, connectionLimitsOf } from '../server/connections.ts';
import { createRequestCore, type RequestCore } from '../server/handler.ts';
import {
  type ConnectionSource,
  createListener,
  localUrl,
  metricsEndpoint,
  type Server,
  startListener,
  type TlsMaterial,
  type UpgradeListener,
} from '../server/listener.ts';
import { answerRefusal, answerRefusalRaw } from '../server/refusal.ts';
import { respondWithStream } from '../server/stream-body.ts';
import { loadTlsMaterial } from '../server/tls.ts';
import { createUpgradeHandler, type UpgradeHandler } from '../server/upgrade.ts';
import type { GatewayContext } from '../state.ts';
import { buildGraph, closeGraph, describeResources, graphHealth, type ServiceGraph } from './graph.ts';
import { type IdleTrim, startIdleTrim } from './idle-trim.ts';
import { type Exchange, OpenExchanges } from './open-exchanges.ts';

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

export interface ReloadOutcome {
  ok: boolean;
  at: string;
  hash?: string;
  /** The previous hash, when the reload swapped in a new graph. */
  previous_hash?: string;
  changed?: boolean;
  error?: string;
  problems?: ConfigProblem[];
  warnings?: string[];
}

export class ServiceRuntime {
  graph: ServiceGraph;
  readonly info: ServiceInfo;
  lastReload: ReloadOutcome | undefined;
  private servers: Server[] = [];
  /** The main listener's connections (ServiceInfo.connections). */
  private readonly connections: ConnectionTracker;
  /** Certificate and key of the main listener, when it serves HTTPS. */
  private tls: TlsMaterial | undefined;
  private mainServer: Server | undefined;
  private upgrades: UpgradeHandler | undefined;
  private closing = false;
  /** Stops `switchyard_event_loop_delay_seconds`'s monitor (observability/event-loop.ts). */
  private stopLoopMonitor: (() => void) | undefined;
  /** The idle memory trim (idle-trim.ts); `requestsSeen` tells it whether requests came. */
  idleTrim: IdleTrim | undefined;
  private requestsSeen = 0;
  private reloading: Promise<ReloadOutcome> | undefined;
  /** Responses not finished yet, per graph (a streamed body outlives its pipeline). */
  private readonly openResponses = new WeakMap<ServiceGraph, number>();
  /** Replaced graphs still draining; close() closes them too. */
  private readonly retired = new Set<ServiceGraph>();
  /** Requests of the main listener not answered yet: what a stop answers at its deadline. */
  private readonly exchanges = new OpenExchanges();
  private core: RequestCore | undefined;
  /** The OpenTelemetry tracer provider, when `tracing.enabled` (runtime/observability/tracing.ts). */
  private tracing: Tracing | undefined;

  private constructor(
    readonly file: string,
    private readonly options: ServiceRuntimeOptions,
    readonly logger: Logger,
    readonly metrics: MetricsKit,
    graph: ServiceGraph,
  ) {
    this.graph = graph;
    this.info = graph.info;
    this.connections = new ConnectionTracker(
      connectionLimitsOf(graph.loaded.config.limits),
      connectionCounters(metrics),
    );
    this.info.connections = () => this.connections.snapshot();
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
    const runtime = new ServiceRuntime(loaded.file, options, logger, metrics, graph);
    runtime.tls = tls;
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
      await runtime.warm(graph);
      await runtime.listen();
      runtime.idleTrim = runtime.startIdleTrim();
    } catch (err) {
      await runtime.close();
      throw err;
    }
    logger.info({ ports: info.ports, hash: loaded.hash }, `service ${config.service} started`);
    return runtime;
  }

  /**
   * Waits (at most warmupMs) until each upstream's first check has an outcome: a child process
   * finishes its handshake, an HTTP upstream answers or refuses. An absent one is reported at
   * once and keeps being probed; health shows it.
   */
  private async warm(graph: ServiceGraph): Promise<void> {
    const ms = this.options.warmupMs ?? 5000;
    await Promise.allSettled(
      [...graph.upstreams.values()].map(({ upstream: u }) => (u.checked ? u.checked(ms) : u.ready(ms))),
    );
    for (const [name, { upstream }] of graph.upstreams) {
      const health = upstream.health();
      if (!health.connected) {
        this.logger.warn(
          { upstream: name, reason: health.error },
          'upstream not reachable yet; serving anyway, probing in the background (health reports it)',
        );
      }
    }
  }

  private async listen(): Promise<void> {
    const config = this.graph.loaded.config;
    // Access lines and request errors are the `http` component's (see observability/logger.ts).
    const httpLogger = this.logger.child({ target: 'http' });
    this.tracing = createTracing(config);
    const core = createRequestCore(this.metrics, httpLogger, config.logging.access_log, this.tracing);
    this.core = core;
    const app = new Koa();
    app.silent = true;
    // Behind a trusted load balancer, take the client address from X-Forwarded-For.
    app.proxy = config.trust_proxy;
    app.use(async (ctx) => {
      // Pin the graph at arrival: a reload during this request does not affect it.
      const graph = this.graph;
      this.requestsSeen++;
      const exchange = this.exchanges.add(ctx as unknown as GatewayContext, graph.dialect);
      this.holdUntilSent(graph, ctx.res, this.connections.requestStarted(ctx.req.socket), exchange);
      await core.handle(graph, ctx as unknown as GatewayContext);
      respondWithStream(ctx);
    });
    const serveMain = app.callback();
    // Upgrade requests (WebSockets) on the main listener: see runtime/server/upgrade.ts.
    const { metrics } = this;
    const accessLog = config.logging.access_log;
    this.upgrades = createUpgradeHandler({
      app,
      serve: serveMain,
      graph: () => this.graph,
      logger: httpLogger,
      metrics,
      accessLog,
    });
    this.info.ports.main = await this.serve(
      serveMain,
      config.listen.host,
      config.listen.port,
      this.upgrades.handle,
      this.connections,
    );
    this.info.mainUrl = localUrl(config.listen.host, this.info.ports.main, this.tls !== undefined);
    const host = new URL(this.info.mainUrl).host;
    this.info.dryRun = (request) => injectDryRun(serveMain, host, request);
    if (this.options.listeners === 'main') return;

    if (config.metrics && config.metrics.enabled !== false) {
      const registry = this.metrics.registry;
      const handler = metricsEndpoint(config.metrics.path, async () => ({
        contentType: registry.contentType,
        text: await registry.metrics(),
      }));
      this.info.ports.metrics = await this.serve(handler, config.metrics.host, config.metrics.port);
    }
    if (config.admin) {
      const admin = createAdminApp(this, config.admin.token, config.hosts);
      this.info.ports.admin = await this.serve(admin.callback(), config.admin.host, config.admin.port);
    }
  }

  /**
   * Counts a response as open on `graph` until it is sent or its connection closes ('close' is
   * emitted in both cases), so that a reload or shutdown waits for streamed bodies too.
   */
  private holdUntilSent(
    graph: ServiceGraph,
    res: ServerResponse,
    connection: { inFlight: number; bytesAtAnswer?: number } | undefined,
    exchange: Exchange,
  ): void {
    this.openResponses.set(graph, (this.openResponses.get(graph) ?? 0) + 1);
    const socket = res.socket;
    res.once('close', () => {
      this.openResponses.set(graph, (this.openResponses.get(graph) ?? 1) - 1);
      this.exchanges.done(exchange);
      if (connection) {
        connection.inFlight--;
        if (socket) connection.bytesAtAnswer = socket.bytesRead;
      }
    });
  }

  private startIdleTrim(): IdleTrim {
    return startIdleTrim(
      {
        settings: () => {
          const { idle_trim_ms, idle_trim_growth_mb } = this.graph.loaded.config.limits;
          return { idleMs: idle_trim_ms, growthBytes: idle_trim_growth_mb * 2 ** 20 };
        },
        busy: () => this.busy(this.graph) || [...this.retired].some((g) => this.busy(g)),
        requestsSeen: () => this.requestsSeen,
        trimTargets: () => {
          const g = this.graph;
          const targets: Array<{ name: string; trim: () => unknown }> = [];
          for (const [name, r] of g.resources) if (r.trimMemory) targets.push({ name, trim: () => r.trimMemory?.() });
          for (const s of g.stages) {
            if (s.instance.trimMemory) targets.push({ name: s.id, trim: () => s.instance.trimMemory?.() });
          }
          return targets;
        },
      },
      this.metrics,
      this.logger,
    );
  }

  /** True while a request, a response body or an upgraded connection still uses `graph`. */
  private busy(graph: ServiceGraph): boolean {
    // graph.inflight: pipelines running and upgraded connections (runtime/server/handler.ts, upgrade.ts).
    return graph.inflight > 0 || (this.openResponses.get(graph) ?? 0) > 0;
  }

  /** Starts a listener; the main one (given `connections`) serves HTTPS when TLS is configured. */
  private serve(
    handler: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void,
    host: string,
    port: number,
    onUpgrade?: UpgradeListener,
    connections?: ConnectionTracker,
  ): Promise<number> {
    const { keep_alive_timeout_ms, header_timeout_ms } = this.graph.loaded.config.limits;
    const tls = connections ? this.tls : undefined;
    const timeouts = { keepAliveMs: keep_alive_timeout_ms, headersMs: header_timeout_ms };
    const main = connections ? this.refusing(connections, handler) : handler;
    const upgrade = connections && onUpgrade ? this.refusingUpgrade(connections, onUpgrade) : onUpgrade;
    const server = createListener(main, timeouts, upgrade, tls);
    if (connections) {
      connections.attach(server, tls !== undefined);
      this.mainServer = server;
      server.on('checkContinue', (req, res) => {
        // `Expect: 100-continue` with a body declared over the limit: the 413 goes out instead of
        // the 100, so the client never sends the body (it is not waited for, see discardBody).
        if (Number(req.headers['content-length']) > this.graph.loaded.config.limits.body_bytes) {
          bodyNotInvited.add(req);
          res.setHeader('Connection', 'close');
        } else if (!connections.isRefusing(req.socket)) res.writeContinue();
        main(req, res);
      });
    }
    this.servers.push(server);
    const source = connections ? this.options.acceptFrom : undefined;
    if (source) {
      source.attach(server);
      return Promise.resolve(source.port);
    }
    return startListener(server, host, port);
  }

  /**
   * The main listener's handler: a request on a connection the tracker refused (near the
   * maximum, over its client's share; or at the maximum) is answered 503 with Retry-After in the
   * service's dialect, not served (runtime/server/refusal.ts).
   */
  private refusing(
    connections: ConnectionTracker,
    handler: (req: IncomingMessage, res: ServerResponse) => void,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      const reason = connections.refusalOf(req.socket);
      if (reason) answerRefusal(req, res, reason, this.graph.dialect);
      else handler(req, res);
    };
  }

  private refusingUpgrade(connections: ConnectionTracker, onUpgrade: UpgradeListener): UpgradeListener {
    return (req, socket, head) => {
      const reason = connections.refusalOf(req.socket);
      if (reason) answerRefusalRaw(socket, reason, this.graph.dialect);
      else onUpgrade(req, socket, head);
    };
  }

  /**
   * Calls `reload()` on every resource and stage of the running graph that has one (they re-read
   * their data: policy files, registries...), in build order, without rebuilding the graph. Each
   * keeps its current data when its own reload fails; the outcome lists what failed.
   */
  async reloadData(): Promise<{ ok: boolean; reloaded: string[]; failed: Array<{ target: string; error: string }> }> {
    const graph = this.graph;
    const reloaded: string[] = [];
    const failed: Array<{ target: string; error: string }> = [];
    const targets: Array<[string, (() => Promise<void>) | undefined]> = [
      ...[...graph.resources].map(
        ([name, r]) => [`resource:${name}`, r.reload?.bind(r)] as [string, (() => Promise<void>) | undefined],
      ),
      ...graph.stages.map(
        (s) => [`stage:${s.id}`, s.instance.reload?.bind(s.instance)] as [string, (() => Promise<void>) | undefined],
      ),
    ];
    for (const [target, reload] of targets) {
      if (!reload) continue;
      try {
        await reload();
        reloaded.push(target);
      } catch (err) {
        failed.push({ target, error: (err as Error).message });
      }
    }
    if (failed.length > 0) this.logger.error({ failed }, 'data reload failed for some parts; they keep their data');
    else this.logger.info({ reloaded }, 'data reloaded');
    return { ok: failed.length === 0, reloaded, failed };
  }

  /** Reloads the config file. Concurrent calls share one reload. */
  reload(): Promise<ReloadOutcome> {
    this.reloading ??= this.doReload().finally(() => {
      this.reloading = undefined;
    });
    return this.reloading;
  }

  private async doReload(): Promise<ReloadOutcome> {
    const at = new Date().toISOString();
    const old = this.graph;
    let outcome: ReloadOutcome;
    try {
      const loaded = await loadService(this.file, this.options);
      // Renewed certificate files (same paths) are picked up by a reload; unreadable ones refuse it.
      const tls = sameJson(old.loaded.config.listen.tls, loaded.config.listen.tls)
        ? loadTlsMaterial(loaded.config.listen.tls, loaded.configDir, loaded.file)
        : undefined;
      const graph = await buildGraph(loaded, {
        logger: this.logger,
        metrics: this.metrics,
        info: this.info,
        previous: old,
      });
      await this.warm(graph);
      this.graph = graph;
      this.retire(old);
      this.connections.setLimits(connectionLimitsOf(loaded.config.limits));
      if (tls && this.tls) this.renewTls(tls);
      outcome = {
        ok: true,
        at,
        hash: loaded.hash,
        previous_hash: old.loaded.hash,
        changed: loaded.hash !== old.loaded.hash,
        warnings: listenerWarnings(old, graph),
      };
      this.logger.info({ hash: loaded.hash, changed: outcome.changed }, 'config reloaded');
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : undefined;
      outcome = { ok: false, at, hash: old.loaded.hash, error: (err as Error).message, problems };
      this.logger.error({ error: outcome.error }, 'config reload failed; the running config is unchanged');
    }
    this.lastReload = outcome;
    return outcome;
  }

  /** Closes a replaced graph once the requests and responses still using it are done. */
  private retire(old: ServiceGraph): void {
    this.retired.add(old);
    const deadline = Date.now() + this.graph.loaded.config.limits.drain_timeout_ms;
    const attempt = () => {
      if (!this.retired.has(old) || this.closing) return; // close() takes over
      if (this.busy(old) && Date.now() < deadline) {
        setTimeout(attempt, 50).unref();
        return;
      }
      void this.closeRetired(old);
    };
    attempt();
  }

  /**
   * Closes a retired graph's stages and resources, and the upstreams no live graph (the current
   * one, or another still draining) shares: an upstream carried over is closed by its last owner.
   */
  private closeRetired(graph: ServiceGraph): Promise<void> {
    this.retired.delete(graph);
    const live = [this.graph, ...this.retired];
    const upstreams = new Map(
      live.flatMap((g, i) => [...g.upstreams].map(([name, u]) => [`${i}:${name}`, u] as const)),
    );
    // closeGraph keeps the upstreams of its `keep` graph; here that is every live graph's.
    return closeGraph(graph, { upstreams } as ServiceGraph);
  }

  /**
   * Graceful stop: every answer not started from now on says `Connection: close`; stop accepting
   * connections; close idle connections after `lingerMs` (see below); let in-flight requests and
   * the responses still streaming (on the current graph and on replaced ones still draining)
   * finish, up to `limits.drain_timeout_ms`; answer what is left (503 in the dialect, see
   * open-exchanges.ts); then close everything.
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.idleTrim?.stop();
    const started = Date.now();
    const deadline = started + this.graph.loaded.config.limits.drain_timeout_ms;
    this.exchanges.startDraining();
    // Until the main listener's source says no more connections come (a cluster worker: the
    // primary passes on those it accepted already), connections may still arrive; so they may
    // until a listener accepted those already in its accept queue (closing it would reset them:
    // server/accept-backlog.ts).
    const source = this.mainServer ? this.options.acceptFrom : undefined;
    const stopAccepting = this.servers.map((s) =>
      s === this.mainServer && source
        ? source.stop()
        : drainAcceptQueue(s, deadline).then((drained) => {
            if (s === this.mainServer) this.logger.info(drained, 'accept queue drained: listener closed');
          }),
    );
    let accepting = true;
    void Promise.allSettled(stopAccepting).then(() => {
      accepting = false;
    });
    const closed = this.servers.map((s, i) => {
      // A connection idle when the stop begins, or once its last answer (sent keep-alive before
      // the stop) is done, stays open `lingerMs`: a request the client sent meanwhile is answered
      // (with Connection: close) instead of meeting a closed socket and a reset.
      s.keepAliveTimeout = lingerMs;
      if (s === this.mainServer && source) return Promise.resolve();
      return (stopAccepting[i] as Promise<void>).then(() => stopListening(s));
    });
    // So does a connection accepted during the stop, for its first request: idle connections are
    // closed once none was accepted for `lingerMs` (Node counts one without a request yet as idle).
    const quietSince = () => Math.max(started, this.connections.lastAcceptedAt);
    let idleClosedFor = -1;
    // Idle when the stop began: closed after `lingerMs` even while the accept queue still drains
    // (new connections keep the rule above), unless a byte arrived on it meanwhile.
    const idleAtStart = this.connections.idleNow();
    let idleAtStartClosed = false;
    const draining = () => this.busy(this.graph) || [...this.retired].some((g) => this.busy(g));
    const waitingFirst = () => this.connections.awaitingFirstRequest(freshMs);
    while (
      (draining() || accepting || waitingFirst() || Date.now() < quietSince() + lingerMs) &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, Math.max(1, Math.min(25, deadline - Date.now()))));
      if (!idleAtStartClosed && Date.now() >= started + lingerMs) {
        idleAtStartClosed = true;
        await new Promise((r) => setImmediate(r));
        this.connections.closeIfStillIdle(idleAtStart);
      }
      const since = quietSince();
      // Swept once per quiet spell, and again while connections not yet used are waited for.
      if ((since !== idleClosedFor || waitingFirst()) && Date.now() >= since + lingerMs) {
        idleClosedFor = since;
        // After the loop's poll phase: a request that arrived while the loop was busy is read
        // first (Node counts a connection whose request is still unread as idle, and closing it
        // with unread bytes resets it).
        await new Promise((r) => setImmediate(r));
        // Connections not yet used get freshMs to send their first request (see closeIdleAtStop);
        // the other listeners' (admin, metrics) are not tracked: Node's sweep.
        this.connections.closeIdleAtStop(freshMs);
        for (const s of this.servers) if (s !== this.mainServer) s.closeIdleConnections();
      }
    }
    const answered = await this.exchanges.answerRemaining((ctx) => this.core?.answeredAtStop(ctx));
    if (answered > 0) this.logger.warn({ answered }, 'drain timeout: requests still open were answered 503 or ended');
    for (const s of this.servers) s.closeAllConnections();
    await this.upgrades?.shutdown();
    await Promise.all(closed);
    for (const g of [...this.retired]) await this.closeRetired(g);
    await closeGraph(this.graph);
    this.stopLoopMonitor?.();
    // Exports the spans still queued; an unreachable collector must not hold the stop.
    await this.tracing?.shutdown().catch((err) => this.logger.warn({ err }, 'tracing: final export failed'));
    this.logger.info('service stopped');
    await flushLogger(this.logger);
  }

  /** Serves new TLS connections with renewed certificate files (open ones keep theirs). */
  private renewTls(tls: TlsMaterial): void {
    this.tls = tls;
    const main = this.mainServer;
    if (main && 'setSecureContext' in main) main.setSecureContext({ cert: tls.cert, key: tls.key });
  }

  /** Health of everything in the current graph, for the admin listener. */
  async health(): Promise<{ ok: boolean; checks: Record<string, HealthReport> }> {
    const checks = await graphHealth(this.graph);
    return { ok: Object.values(checks).every((c) => c.ok), checks };
  }

  /** What is running now, for the config-status endpoint. */
  status(): Record<string, unknown> {
    const g = this.graph;
    return {
      service: this.info.name,
      version: this.info.version,
      file: this.file,
      config_hash: g.loaded.hash,
      loaded_at: g.builtAt.toISOString(),
      started_at: this.info.startedAt.toISOString(),
      ports: this.info.ports,
      upstreams: [...g.upstreams.entries()].map(([name, u]) => ({
        name,
        kind: u.upstream.kind,
        ...u.upstream.health(),
      })),
      resources: [...g.resources.keys()],
      plugins: [...new Set(g.stages.map((s) => s.plugin))].sort(),
      routes: g.routes.map((r) => ({
        id: r.id,
        dialect: r.dialect.name,
        mode: r.mode,
        stages: r.stages.map((s) => ({ plugin: s.plugin, on_error: s.onError, ...(s.instance.describe?.() ?? {}) })),
      })),
      in_flight: g.inflight,
      open_responses: this.openResponses.get(g) ?? 0,
      draining_graphs: this.retired.size,
      last_reload: this.lastReload ?? null,
    };
  }
}

/** How long a connection idle during a stop stays open for a request already on its way (ms). */
const lingerMs = 100;
/** How long a connection accepted before the listener closed may take to send its first request at a stop. */
const freshMs = 1000;

/**
 * Stops accepting connections, leaving the open ones alone. Node's http `close()` also closes the
 * idle ones at once, which resets a request a client sent on one just then; here that waits for
 * `lingerMs` (see close()).
 */
function stopListening(server: Server): Promise<void> {
  return new Promise((resolve) => {
    netServerClose.call(server, () => resolve());
  });
}
const netServerClose = NetServer.prototype.close;

function listenerWarnings(old: ServiceGraph, next: ServiceGraph): string[] {
  const a = old.loaded.config;
  const b = next.loaded.config;
  const warnings: string[] = [];
  for (const key of ['listen', 'metrics', 'admin'] as const) {
    if (JSON.stringify(a[key]) !== JSON.stringify(b[key]))
      warnings.push(`${key} changed: takes effect after a restart`);
  }
  if (JSON.stringify(a.logging) !== JSON.stringify(b.logging))
    warnings.push('logging changed: takes effect after a restart');
  if (JSON.stringify(a.tracing) !== JSON.stringify(b.tracing))
    warnings.push('tracing changed: takes effect after a restart');
  return warnings;
}

/** How this process reaches a listener bound to `host`: loopback when it listens on all interfaces. */
function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The logger's options: `file` against the config's directory. A cluster worker that rotates its
 * file writes its own (`service-worker2.log`): several processes rotating one file would lose lines.
 */
export function loggingOptions(
  config: ServiceConfig['logging'],
  configDir: string,
  worker: number | undefined,
  env: Record<string, string | undefined> = process.env,
): LoggingOptions {
  const logging = { ...config, ...environmentLogging(env) };
  if (!logging.file) return { ...logging, file: undefined };
  let file = resolve(configDir, logging.file);
  if (worker !== undefined && logging.max_size_mb > 0) {
    const ext = extname(file);
    file = `${file.slice(0, file.length - ext.length)}-worker${worker}${ext}`;
  }
  return { ...logging, file };
}

/**
 * LOG_LEVEL and LOG_FORMAT, when set, apply to every service of the process over their files (one
 * switch for the whole stack, the datastore's TOML included). A value that is not one of the
 * choices stops the start rather than being ignored.
 */
function environmentLogging(env: Record<string, string | undefined>): Partial<ServiceConfig['logging']> {
  const out: Partial<ServiceConfig['logging']> = {};
  const level = env.LOG_LEVEL?.trim();
  if (level) {
    if (!LOG_LEVELS.includes(level))
      throw new Error(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, not "${level}"`);
    out.level = level as ServiceConfig['logging']['level'];
  }
  const format = env.LOG_FORMAT?.trim();
  if (format) {
    if (!(LOG_FORMATS as readonly string[]).includes(format)) {
      throw new Error(`LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')}, not "${format}"`);
    }
    out.format = format as LogFormat;
  }
  return out;
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'silent'];
