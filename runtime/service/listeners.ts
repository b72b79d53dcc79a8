/**
 * The listeners of a service: the main one (HTTP or HTTPS, with its connection limits, the
 * WebSocket upgrade path, `Expect: 100-continue`) and, unless it runs in a cluster worker, the
 * metrics and admin listeners. The main listener's requests run on the graph current at their
 * arrival; its TLS certificate is renewed by a reload (open connections keep theirs).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import Koa from 'koa';
import type { Logger } from 'pino';
import { bodyNotInvited } from '../body.ts';
import { injectDryRun } from '../dry-run.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import { createTracing, type Tracing } from '../observability/tracing.ts';
import type { ServiceInfo } from '../plugin.ts';
import { type AdminTarget, createAdminApp } from '../server/admin.ts';
import type { ConnectionTracker } from '../server/connections.ts';
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
import { createUpgradeHandler, type UpgradeHandler } from '../server/upgrade.ts';
import type { GatewayContext } from '../state.ts';
import type { DrainedListeners, GraphDrain } from './drain.ts';
import type { ServiceGraph } from './graph.ts';

/** What the listeners serve: the service's current graph, and what its admin listener asks. */
export interface ListenerHost extends AdminTarget {
  /** The graph serving new requests now (replaced by a reload). */
  readonly graph: ServiceGraph;
  readonly info: ServiceInfo;
  readonly logger: Logger;
  readonly metrics: MetricsKit;
}

export interface ListenerOptions {
  /** `main`: the main listener only (a cluster worker: the primary has the others). */
  listeners?: 'all' | 'main';
  /** The main listener takes its connections from here instead of listening (a cluster worker). */
  acceptFrom?: ConnectionSource;
}

export class ServiceListeners implements DrainedListeners {
  readonly servers: Server[] = [];
  main: Server | undefined;
  upgrades: UpgradeHandler | undefined;
  /** Requests the main listener took so far: the idle trim tells from it whether requests came. */
  requestsSeen = 0;
  private core: RequestCore | undefined;
  /** The OpenTelemetry tracer provider, when `tracing.enabled` (runtime/observability/tracing.ts). */
  private tracing: Tracing | undefined;

  constructor(
    private readonly host: ListenerHost,
    private readonly options: ListenerOptions,
    /** The main listener's connections (ServiceInfo.connections). */
    readonly connections: ConnectionTracker,
    private readonly drain: GraphDrain,
    /** Certificate and key of the main listener, when it serves HTTPS. */
    private tls: TlsMaterial | undefined,
  ) {}

  get source(): ConnectionSource | undefined {
    return this.options.acceptFrom;
  }

  answeredAtStop(ctx: GatewayContext): void {
    this.core?.answeredAtStop(ctx);
  }

  async listen(): Promise<void> {
    const { host, drain, connections } = this;
    const config = host.graph.loaded.config;
    // Access lines and request errors are the `http` component's (see observability/logger.ts).
    const httpLogger = host.logger.child({ target: 'http' });
    this.tracing = createTracing(config);
    const core = createRequestCore(host.metrics, httpLogger, config.logging.access_log, this.tracing);
    this.core = core;
    const app = new Koa();
    app.silent = true;
    // Behind a trusted load balancer, take the client address from X-Forwarded-For.
    app.proxy = config.trust_proxy;
    app.use((ctx) => {
      // Pin the graph at arrival: a reload during this request does not affect it.
      const graph = host.graph;
      this.requestsSeen++;
      drain.track(ctx as unknown as GatewayContext, graph, connections);
      // One `then`, no async frame (docs/performance.md, "Work per request"); handle never rejects.
      return core.handle(graph, ctx as unknown as GatewayContext).then(() => {
        respondWithStream(ctx);
      });
    });
    const serveMain = app.callback();
    // Upgrade requests (WebSockets) on the main listener: see runtime/server/upgrade.ts.
    this.upgrades = createUpgradeHandler({
      app,
      serve: serveMain,
      graph: () => host.graph,
      logger: httpLogger,
      metrics: host.metrics,
      accessLog: config.logging.access_log,
    });
    const { info } = host;
    info.ports.main = await this.serve(
      serveMain,
      config.listen.host,
      config.listen.port,
      this.upgrades.handle,
      connections,
    );
    info.mainUrl = localUrl(config.listen.host, info.ports.main, this.tls !== undefined);
    const mainHost = new URL(info.mainUrl).host;
    info.dryRun = (request) => injectDryRun(serveMain, mainHost, request);
    if (this.options.listeners === 'main') return;

    if (config.metrics && config.metrics.enabled !== false) {
      const registry = host.metrics.registry;
      const handler = metricsEndpoint(config.metrics.path, async () => ({
        contentType: registry.contentType,
        text: await registry.metrics(),
      }));
      info.ports.metrics = await this.serve(handler, config.metrics.host, config.metrics.port);
    }
    if (config.admin) {
      const admin = createAdminApp(host, config.admin.token, config.hosts);
      info.ports.admin = await this.serve(admin.callback(), config.admin.host, config.admin.port);
    }
  }

  /** Starts a listener; the main one (given `connections`) serves HTTPS when TLS is configured. */
  private serve(
    handler: (req: IncomingMessage, res: ServerResponse) => void,
    host: string,
    port: number,
    onUpgrade?: UpgradeListener,
    connections?: ConnectionTracker,
  ): Promise<number> {
    const { keep_alive_timeout_ms, header_timeout_ms } = this.host.graph.loaded.config.limits;
    const tls = connections ? this.tls : undefined;
    const timeouts = { keepAliveMs: keep_alive_timeout_ms, headersMs: header_timeout_ms };
    const main = connections ? this.refusing(connections, handler) : handler;
    const upgrade = connections && onUpgrade ? this.refusingUpgrade(connections, onUpgrade) : onUpgrade;
    const server = createListener(main, timeouts, upgrade, tls);
    if (connections) {
      connections.attach(server, tls !== undefined);
      this.main = server;
      server.on('checkContinue', (req, res) => {
        // `Expect: 100-continue` with a body declared over the limit: the 413 goes out instead of
        // the 100, so the client never sends the body (it is not waited for, see discardBody).
        if (Number(req.headers['content-length']) > this.host.graph.loaded.config.limits.body_bytes) {
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
      if (reason) answerRefusal(req, res, reason, this.host.graph.dialect);
      else handler(req, res);
    };
  }

  private refusingUpgrade(connections: ConnectionTracker, onUpgrade: UpgradeListener): UpgradeListener {
    return (req, socket, head) => {
      const reason = connections.refusalOf(req.socket);
      if (reason) answerRefusalRaw(socket, reason, this.host.graph.dialect);
      else onUpgrade(req, socket, head);
    };
  }

  /** True when the main listener serves HTTPS. */
  get servesTls(): boolean {
    return this.tls !== undefined;
  }

  /** Serves new TLS connections with renewed certificate files (open ones keep theirs). */
  renewTls(tls: TlsMaterial): void {
    this.tls = tls;
    const main = this.main;
    if (main && 'setSecureContext' in main) main.setSecureContext({ cert: tls.cert, key: tls.key });
  }

  /** Exports the spans still queued; an unreachable collector must not hold the stop. */
  async shutdownTracing(): Promise<void> {
    await this.tracing?.shutdown().catch((err) => this.host.logger.warn({ err }, 'tracing: final export failed'));
  }
}
