/**
 * HTTP upgrade requests on the main listener (WebSocket handshakes). Node gives every request
 * with an `Upgrade` header to the server's 'upgrade' event instead of the request handler:
 *
 * - when its route (found like any request's) has a stage that takes upgrades
 *   (`StageInstance.upgrade`), the stages before it run first on the handshake (auth, rate
 *   limit: a missing or wrong key is refused before anything is upgraded), then that stage gets
 *   the socket. A refusal any of them throws is answered in the route's dialect and the
 *   connection closed; so is a handshake over `limits.max_upgraded_connections` (503);
 * - any other upgrade request is served as a plain request with its `Upgrade` header ignored, as
 *   HTTP allows (RFC 9110 §7.8), and the connection closed after the answer. Node does not parse
 *   the body of an upgrade request, so one that has a body is refused (400).
 *
 * An upgraded connection counts as in flight on the graph it arrived on until it closes: a reload
 * retires the old graph (whose stages close their connections) only after the drain timeout, and
 * shutdown asks the connections still open to close (`UpgradedConnection.shutdown`).
 */
import { type IncomingMessage, type RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type Koa from 'koa';
import type { Logger } from 'pino';
import { commitAnswer } from '../answer/answer.ts';
import { GatewayError, toGatewayError } from '../errors.ts';
import { connectionCounters } from '../observability/connection-metrics.ts';
import { type MetricsKit, requestsCounter, stageFailuresCounter } from '../observability/metrics.ts';
import type { UpgradedConnection } from '../plugin.ts';
import type { CompiledRoute, ServiceGraph } from '../service/graph.ts';
import { type BuiltStage, composePipeline } from '../service/pipeline.ts';
import type { GatewayContext, Stage } from '../state.ts';
import { findRoute, requestIdOf } from './handler.ts';
import { checkHostAndOrigin } from './host-check.ts';
import { childTraceparent, enterRoute, newRequestState } from './request-state.ts';

/** How long shutdown waits for connections asked to close before destroying them. */
const shutdownGraceMs = 2000;

export interface UpgradeDeps {
  app: Koa;
  /** The listener's request handler, for upgrade requests served as plain requests. */
  serve: RequestListener;
  /** The current graph; an upgrade pins it like a request does. */
  graph(): ServiceGraph;
  logger: Logger;
  metrics: MetricsKit;
  accessLog: boolean;
}

export interface UpgradeHandler {
  /** The server's 'upgrade' listener. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Asks every open upgraded connection to close, and destroys those still open after a grace period. */
  shutdown(): Promise<void>;
}

export function createUpgradeHandler(deps: UpgradeDeps): UpgradeHandler {
  const { app, logger, metrics } = deps;
  const requests = requestsCounter(metrics);
  const failures = stageFailuresCounter(metrics);
  const counters = connectionCounters(metrics);
  const openGauge = metrics.gauge({
    name: 'switchyard_upgraded_connections',
    help: 'Upgraded connections (WebSockets) open, by route',
    labelNames: ['route'] as const,
  });
  /** Open upgraded sockets, with the stage's handle once the handshake is done. */
  const open = new Map<Duplex, UpgradedConnection | undefined>();
  /** Per route, the stages in front of its upgrade stage, composed once. */
  const frontStages = new WeakMap<CompiledRoute, Stage>();
  const inFront = (route: CompiledRoute, stage: BuiltStage): Stage => {
    let composed = frontStages.get(route);
    if (!composed) {
      composed = composePipeline(route.stages.slice(0, route.stages.indexOf(stage)), metrics, logger);
      frontStages.set(route, composed);
    }
    return composed;
  };

  async function takeOver(
    graph: ServiceGraph,
    route: CompiledRoute,
    stage: BuiltStage,
    ctx: GatewayContext,
    socket: Duplex,
    head: Buffer,
  ): Promise<void> {
    const started = process.hrtime.bigint();
    const config = graph.loaded.config;
    const requestId = requestIdOf(ctx, config.request_id_header);
    // The state a request on the route gets (runtime/server/request-state.ts), trace context included.
    ctx.state = newRequestState(config, requestId);
    ctx.state.traceparent = childTraceparent(ctx.get('traceparent'));
    enterRoute(ctx.state, route, graph);
    const upgrade = String(ctx.get('upgrade')).toLowerCase();
    const elapsedMs = () => Math.round(Number(process.hrtime.bigint() - started) / 1e3) / 1e3;
    const line = { request_id: requestId, method: ctx.method, path: ctx.path, route: route.id, upgrade };

    graph.inflight++;
    open.set(socket, undefined);
    openGauge.inc({ route: route.id });
    let upgraded = false;
    socket.once('close', () => {
      graph.inflight--;
      open.delete(socket);
      openGauge.dec({ route: route.id });
      if (upgraded && deps.accessLog) logger.info({ ...line, duration_ms: elapsedMs() }, 'upgraded connection closed');
    });

    let status = 101;
    let overLimit = false;
    try {
      if (graph.inflight > config.limits.max_concurrent) {
        throw new GatewayError('overloaded', 'Too many concurrent requests, retry shortly', {
          headers: { 'Retry-After': '1' },
        });
      }
      if (open.size > config.limits.max_upgraded_connections) {
        overLimit = true;
        counters.refused('upgrade_limit');
        throw new GatewayError('overloaded', 'Too many open WebSocket connections, retry later', {
          headers: { 'Retry-After': '5' },
        });
      }
      bearerFromSubprotocol(ctx.req);
      await inFront(route, stage)(ctx, async () => {
        const connection = await stageUpgrade(stage, ctx, socket, head, route);
        upgraded = true;
        if (open.has(socket)) open.set(socket, connection);
      });
      // A stage in front answered by itself (without calling next): that answer, not an upgrade.
      if (!upgraded) {
        counters.refused('upgrade_refused');
        commitAnswer(ctx); // the answer store's, as the request core writes it
        status = ctx.status;
        const body: unknown = ctx.body;
        const type = ctx.response.get('content-type');
        respondAndClose(ctx.req, socket, (res) => {
          res.statusCode = status;
          if (Buffer.isBuffer(body) || typeof body === 'string') {
            res.setHeader('Content-Type', type || 'application/octet-stream');
            res.end(body);
            return;
          }
          res.setHeader('Content-Type', 'application/json; charset=utf-8');
          res.end(JSON.stringify(body ?? null));
        });
      }
    } catch (err) {
      if (upgraded) {
        // A stage in front failed in its answer phase, after the socket was handed over.
        logger.error({ err, request_id: requestId }, 'stage failed after an upgrade');
        return;
      }
      const gerr = toGatewayError(err);
      if (!overLimit) counters.refused('upgrade_refused');
      if (!(err instanceof GatewayError)) {
        failures.inc({ stage: stage.id, plugin: stage.plugin, on_error: stage.onError });
        logger.error({ err, stage: stage.id, request_id: requestId }, 'stage failed internally during an upgrade');
      }
      const rendered = route.dialect.render(gerr);
      status = rendered.status;
      respondAndClose(ctx.req, socket, (res) => {
        res.statusCode = status;
        for (const [k, v] of Object.entries(gerr.headers ?? {})) res.setHeader(k, v);
        res.setHeader(config.request_id_header, requestId);
        res.setHeader('X-Request-Id', requestId);
        res.setHeader('Content-Type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(rendered.body));
      });
    }
    requests.inc({ route: route.id, method: ctx.method, status: String(status) });
    if (deps.accessLog) logger.info({ ...line, status, duration_ms: elapsedMs() }, 'request');
  }

  return {
    handle(req, socket, head) {
      // Until a stage takes the socket, its errors (a reset client) must not crash the process.
      socket.on('error', (err) => logger.debug({ err }, 'upgrade socket error'));
      const graph = deps.graph();
      const ctx = app.createContext(req, new ServerResponse(req)) as unknown as GatewayContext;
      let route: CompiledRoute | undefined;
      try {
        checkHostAndOrigin(req.headers, graph.loaded.config.hosts);
        route = findRoute(graph, ctx);
      } catch {
        // A refused Host/Origin (cross-site WebSocket), 404 / 405: the request core answers them
        // as for any request.
      }
      const stage = route?.stages.find((s) => s.instance.upgrade);
      if (route && stage) {
        void takeOver(graph, route, stage, ctx, socket, head);
        return;
      }
      if (hasBody(req)) {
        const rendered = graph.dialect.render(
          new GatewayError('bad_request', 'Protocol upgrade is not available on this path; retry without Upgrade'),
        );
        respondAndClose(req, socket, (res) => {
          res.statusCode = rendered.status;
          res.setHeader('Content-Type', 'application/json; charset=utf-8');
          res.end(JSON.stringify(rendered.body));
        });
        return;
      }
      respondAndClose(req, socket, (res) => deps.serve(req, res));
    },

    async shutdown() {
      for (const [socket, connection] of open) {
        if (connection) connection.shutdown();
        else socket.destroy();
      }
      const deadline = Date.now() + shutdownGraceMs;
      while (open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      for (const socket of open.keys()) socket.destroy();
    },
  };
}

function stageUpgrade(
  stage: BuiltStage,
  ctx: GatewayContext,
  socket: Duplex,
  head: Buffer,
  route: CompiledRoute,
): Promise<UpgradedConnection> {
  const upgrade = stage.instance.upgrade?.bind(stage.instance);
  if (!upgrade) throw new Error(`stage ${stage.id} takes no upgrades`);
  return upgrade(ctx.req, socket, head, { ctx, renderError: (err) => route.dialect.render(err) });
}

/**
 * Writes an HTTP answer on an upgrade request's socket (which Node has detached from its HTTP
 * machinery) through a ServerResponse bound to it, then closes the connection.
 */
function respondAndClose(req: IncomingMessage, socket: Duplex, write: (res: ServerResponse) => void): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const res = new ServerResponse(req);
  res.assignSocket(socket as Socket);
  res.shouldKeepAlive = false; // sends `Connection: close`: the socket cannot serve another request
  res.once('finish', () => {
    res.detachSocket(socket as Socket);
    (socket as Socket).destroySoon();
  });
  write(res);
}

/**
 * Browsers cannot set headers on a WebSocket: the convention is to offer the key as a subprotocol
 * `authorization.bearer.<base64url key>` (see plugins/websocket-bridge). A handshake without an
 * Authorization header that offers one is checked by the stages in front as `Bearer <key>`.
 */
function bearerFromSubprotocol(req: IncomingMessage): void {
  const offered = req.headers['sec-websocket-protocol'];
  if (req.headers.authorization !== undefined || typeof offered !== 'string') return;
  const prefix = 'authorization.bearer.';
  const token = offered
    .split(',')
    .map((p) => p.trim())
    .find((p) => p.startsWith(prefix));
  if (!token) return;
  const key = Buffer.from(token.slice(prefix.length), 'base64url').toString('utf8');
  // Printable ASCII only: anything else could not be a header value (the auth stage says 401).
  if (/^[\x21-\x7e]+$/.test(key)) req.headers.authorization = `Bearer ${key}`;
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
