/**
 * The request core every listener runs before a route's pipeline: request id, trace context,
 * routing, concurrency cap, error rendering through the route's dialect, access log and metrics.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { commitAnswer, discardAnswer } from '../answer/answer.ts';
import { discardBody, discardBound } from '../body.ts';
import type { Dialect } from '../dialects.ts';
import { dryRunOf, keepDryRunState } from '../dry-run.ts';
import { GatewayError, toGatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import { labelledSeries, latencyBuckets, requestsCounter } from '../observability/metrics.ts';
import { startServerSpan, type Tracing, traceparentOf } from '../observability/tracing.ts';
import type { CompiledRoute, ServiceGraph } from '../service/graph.ts';
import type { GatewayContext, Stage } from '../state.ts';
import { checkHostAndOrigin } from './host-check.ts';
import { childTraceparent, enterRoute, newRequestState } from './request-state.ts';
import { endServerSpan } from './server-span.ts';

const safeRequestId = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request's id: a safe incoming one (the configured header, else X-Request-Id) is kept, anything else replaced. */
export function requestIdOf(ctx: GatewayContext, header: string): string {
  const incoming = ctx.get(header) || ctx.get('x-request-id');
  return safeRequestId.test(incoming) ? incoming : randomUUID();
}

export interface RequestCore {
  handle(graph: ServiceGraph, ctx: GatewayContext): Promise<void>;
  /**
   * Logs a request the service answered itself while stopping (503 at the drain deadline): its
   * pipeline may never return before the process exits. It is not logged again when it does.
   */
  answeredAtStop(ctx: GatewayContext): void;
}

/** When a request started (performance.now(), ms), and whether its access line was written already. */
const startedAt = Symbol('request started');
const logged = Symbol('request logged');
type Timed = GatewayContext & { [startedAt]?: number; [logged]?: boolean };

export function createRequestCore(
  metrics: MetricsKit,
  logger: Logger,
  accessLog: boolean,
  tracing?: Tracing,
): RequestCore {
  const requests = requestsCounter(metrics);
  const duration = metrics.histogram({
    name: 'switchyard_request_duration_seconds',
    help: 'Time to answer a request (until the response headers and body are handed to the socket)',
    labelNames: ['route', 'method'] as const,
    buckets: latencyBuckets,
  });
  const overhead = gatewayOverheadHistogram(metrics);
  // Per request, the series of its route, method and status: made once each, then reused.
  const requestsOf = labelledSeries(requests);
  const durationOf = labelledSeries(duration);
  const overheadOf = labelledSeries(overhead);
  // Read at scrape time from a count kept here: no metric update on the request path.
  const inflight = inflightCount(metrics);
  const rejected = metrics.counter({
    name: 'switchyard_requests_rejected_total',
    help: 'Requests refused before their pipeline ran, by reason',
    labelNames: ['reason'] as const,
  });
  const hostRefused = (header: 'host' | 'origin') => rejected.inc({ reason: `${header}_not_allowed` });

  const logRequest = (ctx: Timed, seconds: number) => {
    ctx[logged] = true;
    logger.info(
      {
        request_id: ctx.state.requestId,
        method: ctx.method,
        path: ctx.path,
        route: ctx.state.route,
        status: ctx.status,
        duration_ms: Math.round(seconds * 1e6) / 1e3,
        caller: ctx.state.caller?.id,
      },
      'request',
    );
  };

  return {
    answeredAtStop(ctx: Timed) {
      const started = ctx[startedAt];
      if (accessLog && started !== undefined && !ctx[logged]) {
        logRequest(ctx, (performance.now() - started) / 1e3);
      }
    },

    async handle(graph, ctx: Timed) {
      // A double, not a BigInt: no allocation for the start or the duration.
      const started = performance.now();
      ctx[startedAt] = started;
      const config = graph.loaded.config;
      const requestId = requestIdOf(ctx, config.request_id_header);
      // Straight to Node: a string, nothing sent yet (what ctx.set does, without its per-call arrays).
      ctx.res.setHeader(config.request_id_header, requestId);
      if (alsoXRequestId(config.request_id_header)) ctx.res.setHeader('X-Request-Id', requestId);
      ctx.state = newRequestState(config, requestId);
      const trace = ctx.state.trace!;
      if (tracing) {
        const span = startServerSpan(tracing.tracer, ctx.method, ctx.get('traceparent'), {
          'http.request.method': ctx.method,
          'url.path': ctx.path,
          'url.scheme': ctx.protocol,
          'server.address': ctx.hostname,
          'switchyard.request_id': requestId,
        });
        // An unsampled request gets no stage or client spans (cheap at sample_ratio 0): its
        // upstreams see the unsampled server span context.
        if (span.isRecording()) {
          trace.tracer = tracing.tracer;
          trace.span = span;
        }
        ctx.state.traceparent = traceparentOf(span);
      } else {
        ctx.state.traceparent = childTraceparent(ctx.get('traceparent'));
      }
      let route: CompiledRoute | undefined;
      let pipelineRan = false;
      let failure: string | undefined;
      graph.inflight++;
      inflight.n++;
      try {
        checkHostAndOrigin(ctx.req.headers, config.hosts, hostRefused);
        route = findRoute(graph, ctx);
        enterRoute(ctx.state, route, graph);
        if (trace.span) {
          trace.span.updateName(`${ctx.method} ${route.path}`);
          trace.span.setAttributes({ 'http.route': route.path, 'switchyard.route': route.id });
        }
        if (graph.inflight > config.limits.max_concurrent) {
          rejected.inc({ reason: 'overloaded' });
          throw new GatewayError('overloaded', 'Too many concurrent requests, retry shortly', {
            headers: { 'Retry-After': '1' },
          });
        }
        pipelineRan = true;
        await runPipeline(pipelineOf(route, ctx), ctx);
      } catch (err) {
        discardAnswer(ctx);
        const refused = toGatewayError(err);
        // The client may still be sending the refused body: read it first, so the 413 reaches it.
        if (
          refused.kind === 'payload_too_large' &&
          !(await discardBody(ctx.req, discardBound(config.limits.body_bytes)))
        ) {
          ctx.set('Connection', 'close');
        }
        if (refused.kind === 'internal_error') {
          logger.error(
            { err: refused.cause ?? err, request_id: ctx.state.requestId, route: ctx.state.route },
            'internal error',
          );
        }
        renderError(ctx, refused, route?.dialect ?? graph.dialect);
        failure = refused.kind;
      } finally {
        if (ctx.state.dryRun) keepDryRunState(ctx.req, ctx.state);
        graph.inflight--;
        inflight.n--;
        if (!pipelineRan) graph.info.refusedRequests = (graph.info.refusedRequests ?? 0) + 1;
        const seconds = (performance.now() - started) / 1e3;
        const routeId = ctx.state.route;
        const method = ctx.method;
        requestsOf(routeId, method, statusText(ctx.status)).inc();
        durationOf(routeId, method).observe(seconds);
        overheadOf(routeId).observe(Math.max(0, seconds - trace.upstreamNs / 1e9));
        if (trace.span) endServerSpan(trace.span, ctx, failure);
        if (accessLog && !ctx[logged]) logRequest(ctx, seconds);
      }
    },
  };
}

/** Whether the service's request id header is not X-Request-Id (which then carries the id too): asked once per name. */
let idHeader = 'x-request-id';
let idHeaderOther = false;
function alsoXRequestId(header: string): boolean {
  if (header !== idHeader) {
    idHeader = header;
    idHeaderOther = header.toLowerCase() !== 'x-request-id';
  }
  return idHeaderOther;
}

/** A status code as a label value: the common ones made once. */
const statusTexts = new Map<number, string>();
function statusText(status: number): string {
  let text = statusTexts.get(status);
  if (text === undefined) {
    text = String(status);
    if (statusTexts.size < 1000) statusTexts.set(status, text);
  }
  return text;
}

/** `switchyard_gateway_overhead_seconds{route}`: a request's time minus its time waiting on upstreams. */
export function gatewayOverheadHistogram(metrics: MetricsKit) {
  return metrics.histogram({
    name: 'switchyard_gateway_overhead_seconds',
    help: 'Time the gateway itself spent on a request: its duration minus the time upstream calls were open',
    labelNames: ['route'] as const,
    buckets: latencyBuckets,
  });
}

/** The requests in flight of a service (every request core on its metrics), behind its gauge. */
const inflightCounts = new WeakMap<MetricsKit, { n: number }>();
function inflightCount(metrics: MetricsKit): { n: number } {
  let count = inflightCounts.get(metrics);
  if (!count) {
    const counted = { n: 0 };
    count = counted;
    inflightCounts.set(metrics, counted);
    metrics.gauge({
      name: 'switchyard_requests_in_flight',
      help: 'Requests being answered',
      collect() {
        this.set(counted.n);
      },
    });
  }
  return count;
}

/**
 * The route's pipeline for this request: its dry-run pipeline for a dry run (runtime/dry-run.ts),
 * which only an in-process caller can start; refused when a stage of the route has none.
 */
function pipelineOf(route: CompiledRoute, ctx: GatewayContext): Stage {
  const dryRun = dryRunOf(ctx.req);
  if (!dryRun) return route.handle;
  if (typeof route.dryRun === 'string') {
    throw new GatewayError('bad_request', `Route ${route.id} cannot be dry-run: ${route.dryRun}`, {
      details: { route: route.id, reason: route.dryRun },
    });
  }
  ctx.state.dryRun = dryRun;
  return route.dryRun;
}

export function findRoute(graph: ServiceGraph, ctx: GatewayContext): CompiledRoute {
  const method = ctx.method;
  const path = ctx.path;
  let pathMatched = false;
  // A path some route declares literally: only the routes that match it (route-table.ts).
  for (const route of graph.literalPaths.get(path) ?? graph.routes) {
    const m = route.match(path);
    if (!m) continue;
    pathMatched = true;
    if (route.methods.has(method) || (method === 'HEAD' && route.methods.has('GET'))) {
      ctx.params = m.params as Record<string, string>;
      return route;
    }
  }
  if (pathMatched) {
    const allowed = new Set<string>();
    for (const route of graph.routes) if (route.match(path)) for (const m of route.methods) allowed.add(m);
    throw new GatewayError('method_not_allowed', `Method ${method} is not allowed on ${path}`, {
      headers: { Allow: [...allowed].join(', ') },
      details: { allowed: [...allowed] },
    });
  }
  throw new GatewayError('not_found', `No route for ${method} ${path}`);
}

/**
 * Runs a pipeline the way every request runs one (the request core, the test harness): a
 * pipeline that ends without an answer is a config mistake, and once every stage's answer phase
 * is done the answer goes out.
 */
export function runPipeline(pipeline: Stage, ctx: GatewayContext): Promise<void> {
  // Every stage's answer phase is done: the answer goes out now. One `then`, no async frame.
  return pipeline(ctx, noTerminalStage.bind(undefined, ctx)).then(() => commitAnswer(ctx));
}

async function noTerminalStage(ctx: GatewayContext): Promise<void> {
  if (ctx.body === undefined && ctx.status === 404 && !ctx.state.answer) {
    throw new GatewayError('internal_error', 'The route pipeline produced no response (no terminal stage)');
  }
}

/** Writes a refusal in `dialect`; a response already under way is cut instead (the client sees it broken). */
export function renderError(ctx: GatewayContext, gerr: GatewayError, dialect: Dialect): void {
  // Answered already (the 503 of a stop at its drain deadline): nothing to add, nothing to cut.
  if (ctx.res.writableEnded) return;
  if (ctx.headerSent || !ctx.writable) {
    // No answer was sent and the client went away: 499 (nginx's "client closed request") in the
    // metrics and the access log, rather than Koa's untouched default (404).
    if (!ctx.headerSent) ctx.status = 499;
    // Too late for an error body (a stream had started): cut the connection so the client sees it.
    ctx.req.socket.destroy();
    return;
  }
  const rendered = dialect.render(gerr, gerr.rpcId ?? ctx.state.rpc?.id);
  ctx.status = rendered.status;
  ctx.body = rendered.body;
  for (const [k, v] of Object.entries(gerr.headers ?? {})) ctx.set(k, v);
}
