/**
 * Times every upstream call a request makes (for switchyard_gateway_overhead_seconds) and, when
 * the request is traced, makes it a client span whose context replaces the `traceparent` sent
 * upstream (the upstream sees the gateway's client span as its parent). Applied to each upstream
 * where it is created (create.ts, through `around`): the upstream classes stay unaware of tracing. Calls without a
 * `trace` (health probes, a JSON-RPC upstream's own forward inside `call`) pass straight through.
 */
import { type Span, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { GatewayError } from '../errors.ts';
import { type RequestTrace, upstreamCallEnded, upstreamCallStarted } from '../observability/request-trace.ts';
import { startChildSpan, traceparentOf } from '../observability/tracing.ts';
import type { JsonRpcRequest } from '../state.ts';
import { around } from './around.ts';
import type {
  HttpForwardRequest,
  HttpForwardResponse,
  HttpUpstream,
  RpcCallOptions,
  RpcUpstream,
  Upstream,
} from './types.ts';

export interface TracedSettings {
  /** An MCP upstream: requests carry the trace context in `params._meta` as well. */
  mcp?: boolean;
}

export function traced<U extends Upstream>(upstream: U, settings: TracedSettings = {}): U {
  return around(upstream, {
    // Not async: an untraced call costs one `then` here, no async frame of its own (docs/
    // performance.md, "Work per request"); a traced one goes through the span's async path,
    // where a throw (a span that cannot start) is a rejection, as before.
    forward: (forward) => (req) => {
      const t = req.trace;
      if (!t) return forward(req);
      // Untraced (tracing off, or not sampled): only timed, with no closures or spans per call.
      if (!(t.tracer && t.span)) return timed(t, forward, req);
      return forwardInSpan(forward, req, t, t.tracer, t.span);
    },
    call: (call) => (message: JsonRpcRequest, options?: RpcCallOptions) => {
      const t = options?.trace;
      if (!t) return call(message, options);
      if (!(t.tracer && t.span)) return timed(t, call, message, options);
      return callInSpan(call, message, options, t, t.tracer, t.span);
    },
  });

  async function forwardInSpan(
    forward: HttpUpstream['forward'],
    req: HttpForwardRequest,
    t: RequestTrace,
    tracer: Tracer,
    parent: Span,
  ): Promise<HttpForwardResponse> {
    const span = startChildSpan(tracer, parent, req.method, SpanKind.CLIENT);
    const url = (upstream as unknown as HttpUpstream).url;
    span.setAttributes({
      'http.request.method': req.method,
      'server.address': url.hostname,
      'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
      // The path only: a query string may carry secrets.
      'url.full': `${url.origin}${url.pathname.replace(/\/$/, '')}${req.path.split('?')[0]}`,
      'switchyard.upstream': upstream.name,
    });
    req.headers = { ...req.headers, traceparent: traceparentOf(span) };
    return timedCall(
      t,
      span,
      () => forward(req),
      (res, s) => {
        s.setAttribute('http.response.status_code', res.status);
        if (res.status >= 500) failed(s, String(res.status));
      },
    );
  }

  async function callInSpan(
    call: RpcUpstream['call'],
    message: JsonRpcRequest,
    options: RpcCallOptions | undefined,
    t: RequestTrace,
    tracer: Tracer,
    parent: Span,
  ): Promise<Awaited<ReturnType<RpcUpstream['call']>>> {
    const span = startChildSpan(tracer, parent, `${message.method} ${upstream.name}`, SpanKind.CLIENT);
    span.setAttributes({ ...mcpAttributes(message), 'switchyard.upstream': upstream.name });
    const traceparent = traceparentOf(span);
    // Over HTTP the header carries it; a stdio child has no headers: for MCP, `params._meta`
    // carries it too (SEP-414, the OpenTelemetry MCP conventions), on every transport.
    const traced = { ...options, headers: { ...options?.headers, traceparent } };
    const sent = settings.mcp ? withTraceMeta(message, traceparent) : message;
    return timedCall(
      t,
      span,
      () => call(sent, traced),
      (answer, s) => {
        if (answer && typeof answer.error === 'object' && answer.error !== null) {
          const code = (answer.error as { code?: unknown }).code;
          s.setAttribute('rpc.response.status_code', String(code));
          failed(s, String(code));
        }
      },
    );
  }
}

/**
 * An untraced request's upstream call, `run(a, b)`, counted open for the overhead metric while
 * it runs: one `then`, and a throw of `run` is a rejection, as from an async function.
 */
function timed<A, B, R>(t: RequestTrace, run: (a: A, b?: B) => Promise<R>, a: A, b?: B): Promise<R> {
  upstreamCallStarted(t);
  let running: Promise<R>;
  try {
    running = run(a, b);
  } catch (err) {
    upstreamCallEnded(t);
    return Promise.reject(err);
  }
  return running.then(
    (result) => {
      upstreamCallEnded(t);
      return result;
    },
    (err: unknown) => {
      upstreamCallEnded(t);
      throw err;
    },
  );
}

/**
 * One upstream call: counted open for the overhead metric while it runs; its client span (when
 * traced) marks the answer (`mark`) or the exception, and ends.
 */
async function timedCall<R>(
  t: RequestTrace,
  span: Span | undefined,
  run: () => Promise<R>,
  mark: (result: R, span: Span) => void,
): Promise<R> {
  upstreamCallStarted(t);
  try {
    const result = await run();
    if (span) mark(result, span);
    return result;
  } catch (err) {
    if (span) failed(span, errorType(err));
    throw err;
  } finally {
    upstreamCallEnded(t);
    span?.end();
  }
}

/**
 * The request with `params._meta.traceparent` set (a copy: the caller's message is not changed).
 * Positional (array) params have no `_meta` and are left alone; a client's own traceparent there
 * is replaced, as the header is: the gateway's client span is the upstream's parent.
 */
export function withTraceMeta(message: JsonRpcRequest, traceparent: string): JsonRpcRequest {
  const params = message.params;
  if (Array.isArray(params)) return message;
  const base = params && typeof params === 'object' ? (params as Record<string, unknown>) : {};
  const meta = base._meta && typeof base._meta === 'object' ? (base._meta as Record<string, unknown>) : {};
  return { ...message, params: { ...base, _meta: { ...meta, traceparent } } };
}

/** MCP semantic conventions of a JSON-RPC message: method, request id, tool name (never arguments). */
export function mcpAttributes(message: JsonRpcRequest): Record<string, string> {
  const out: Record<string, string> = { 'mcp.method.name': message.method, 'rpc.system': 'jsonrpc' };
  if (message.id !== undefined && message.id !== null) out['jsonrpc.request.id'] = String(message.id);
  const params = message.params as { name?: unknown; uri?: unknown } | undefined;
  if (message.method === 'tools/call' && typeof params?.name === 'string') out['gen_ai.tool.name'] = params.name;
  if (message.method === 'prompts/get' && typeof params?.name === 'string') out['gen_ai.prompt.name'] = params.name;
  return out;
}

function failed(span: Span, type: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

export function errorType(err: unknown): string {
  if (err instanceof GatewayError) return err.kind;
  return err instanceof Error ? err.name : 'unknown';
}
