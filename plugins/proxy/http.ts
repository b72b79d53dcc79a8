/**
 * Forwarding to an HTTP upstream: the request goes out with the original (or re-serialised)
 * body; the upstream's answer is left on `ctx.state.answer` for the answer phase of the stages
 * before this one (runtime/answer/answer.ts), and written by the runtime once they are done:
 * streamed as it came when no stage reads it.
 */
import {
  Answer,
  ClientAbort,
  type GatewayContext,
  GatewayError,
  type HttpForwardResponse,
  type HttpUpstream,
  isUninspectable,
  readBody,
  readWhole,
} from '../../runtime/index.ts';
import { upstreamRequestHeaders, upstreamResponseHeaders } from './headers.ts';

export interface HttpProxyOptions {
  headerNames: string[];
  path?: string;
  timeoutMs?: number;
}

const noBodyStatus = new Set([204, 205, 304]);

export async function proxyHttp(ctx: GatewayContext, upstream: HttpUpstream, o: HttpProxyOptions): Promise<void> {
  const replaced = Boolean(ctx.state.rpcModified && ctx.state.rpc);
  const reserialised = replaced || Boolean(ctx.state.jsonModified && ctx.state.json !== undefined);
  // A client that goes away before the upstream answered cancels the upstream request.
  const signal = ClientAbort.watch(ctx.res);
  let res: HttpForwardResponse;
  try {
    res = await upstream.forward({
      method: ctx.method,
      path: o.path ?? ctx.url,
      headers: upstreamRequestHeaders(ctx, o.headerNames, reserialised),
      body: await requestBody(ctx, replaced),
      signal,
      timeoutMs: o.timeoutMs,
      trace: ctx.state.trace,
    });
  } finally {
    ClientAbort.unwatch(ctx.res);
  }
  // upstreamResponseHeaders leaves lower-case names and no undefined value: adopted, not copied.
  const init = { status: res.status, headers: upstreamResponseHeaders(res.headers), headersNormalised: true };
  try {
    const body = await answerBody(ctx, res);
    ctx.state.answer = new Answer(ctx, { status: init.status, headers: init.headers, headersNormalised: true, body });
  } catch (err) {
    // The upstream's deadline passed while the body was read: a timeout (504), not a cut-short answer.
    const cause = (err as { cause?: unknown }).cause;
    if (isUninspectable(err) && cause instanceof GatewayError && cause.kind === 'upstream_timeout') throw cause;
    // Cut short while read whole: the stages' readers refuse it, and it is never sent as a success.
    if (!isUninspectable(err)) throw err;
    ctx.state.answer = Answer.broken(ctx, init, err);
  }
}

async function requestBody(ctx: GatewayContext, replaced: boolean): Promise<Buffer | string | null> {
  if (replaced) return JSON.stringify(ctx.state.rpc);
  if (ctx.state.jsonModified && ctx.state.json !== undefined) return JSON.stringify(ctx.state.json);
  if (ctx.state.rawBody) return ctx.state.rawBody;
  if (ctx.method === 'GET' || ctx.method === 'HEAD') return null;
  const length = ctx.req.headers['content-length'];
  const chunked = ctx.req.headers['transfer-encoding'] !== undefined;
  if (!chunked && (length === undefined || length === '0')) return null;
  // Nobody read it yet: read it now, so the service's body-size limit applies (413) here too.
  return readBody(ctx);
}

/**
 * Small answers (by Content-Length) are read whole here: written in one go with the headers,
 * cheaper than piping a stream (no pipeline, no end-of-stream bookkeeping). Larger ones and event
 * streams stay streams until a stage reads them or the runtime writes them.
 */
async function answerBody(
  ctx: GatewayContext,
  res: HttpForwardResponse,
): Promise<Buffer | HttpForwardResponse['body'] | null> {
  if (noBodyStatus.has(res.status) || ctx.method === 'HEAD') {
    res.body.resume();
    return null;
  }
  const type = res.headers['content-type'];
  const sse = typeof type === 'string' && type.toLowerCase().startsWith('text/event-stream');
  if (!sse && isSmall(res.headers['content-length'])) return readWhole(res.body, bufferLimit);
  return res.body;
}

/**
 * Answers up to this size (by their Content-Length) are buffered rather than streamed; the same
 * size as the upstreams' small answers, which must arrive whole within the response timeout.
 */
const bufferLimit = 64 * 1024;

function isSmall(length: string | string[] | undefined): boolean {
  if (typeof length !== 'string') return false;
  const n = Number(length);
  return n >= 0 && n <= bufferLimit;
}
