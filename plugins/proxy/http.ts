/**
 * Forwarding to an HTTP upstream: the request goes out with the original (or re-serialised)
 * body; the upstream's answer is left on `ctx.state.answer` for the answer phase of the stages
 * before this one (runtime/answer/answer.ts), and written by the runtime once they are done:
 * streamed as it came when no stage reads it.
 */
import { Readable } from 'node:stream';
import {
  Answer,
  bodyChangeOf,
  ClientAbort,
  dropUpstreamAnswer,
  type GatewayContext,
  GatewayError,
  type HttpForwardResponse,
  type HttpUpstream,
  isUninspectable,
  type ProviderFailure,
  type ProvidersTried,
  type ReadTimeout,
  readBody,
  readWhole,
  replacedBody,
} from '../../runtime/index.ts';
import {
  coolDown,
  failedStatus,
  failureOfError,
  noProviderError,
  recovered,
  retryAfterMs,
  tryOrder,
} from './failover.ts';
import { upstreamRequestHeaders, upstreamResponseHeaders } from './headers.ts';
import type { SessionBinding } from './session-binding.ts';

/** Made once per stage (the request's path and failover callback are proxyHttp's own arguments). */
export interface HttpProxyOptions {
  headerNames: string[];
  timeoutMs?: number;
  /** How long a failed upstream of a list is tried after the others (failover.ts). */
  cooldownMs: number;
  /** With a list: time from a stream's headers to its first byte before the next upstream is tried. */
  firstByteTimeoutMs?: number;
  /** Times one try of an upstream (headers; whole body when small). */
  observe(upstream: string, seconds: number): void;
  /** MCP session ids the upstream issues, bound to the caller (session-binding.ts). */
  sessions?: SessionBinding;
}

const noBodyStatus = new Set([204, 205, 304]);

/** Called for each upstream given up on (failover), before the next is tried. */
export type OnFailover = (failure: ProviderFailure) => void;

/**
 * Forwards the request to the first upstream of `list` that answers (failover.ts says which
 * failures move it on), at `path` (the request's path and query as the upstream sees them). With
 * one upstream its answer or error is the request's, as it came.
 */
export async function proxyHttp(
  ctx: GatewayContext,
  list: readonly HttpUpstream[],
  o: HttpProxyOptions,
  path: string,
  onFailover?: OnFailover,
): Promise<void> {
  const replaced = replacedBody(ctx);
  const headers = upstreamRequestHeaders(ctx, o.headerNames, replaced !== undefined);
  o.sessions?.forward(ctx, headers);
  // A body read already is taken as it is (no async call and await for a value in hand).
  const body = replaced ?? ctx.state.rawBody ?? (await requestBody(ctx));
  const tried: ProvidersTried = { failed: [] };
  ctx.state.providers = tried;
  const order = list.length > 1 ? tryOrder(list) : list;
  let retryAfter: number | undefined;
  // A client that goes away cancels the upstream request, and later releases a streamed answer
  // that a stage is still reading (the watch lasts as long as the response: nothing to undo).
  const signal = ClientAbort.watch(ctx.res);
  for (let i = 0; i < order.length; i++) {
    const upstream = order[i] as HttpUpstream;
    const last = i === order.length - 1;
    const failover = order.length > 1;
    const started = performance.now();
    try {
      let res: HttpForwardResponse;
      try {
        // Its own name of the model, when it has one (a copy of the request); else the request as it is.
        const renamed =
          upstream.providerModel && body !== null ? providerRequest(ctx, upstream, headers, body) : undefined;
        res = await upstream.forward({
          method: ctx.method,
          path,
          headers: renamed ? renamed.headers : headers,
          body: renamed ? renamed.body : body,
          signal,
          timeoutMs: o.timeoutMs,
          trace: ctx.state.trace,
        });
      } catch (err) {
        const reason = failover ? failureOfError(err) : undefined;
        if (reason === undefined || signal.aborted) throw err;
        giveUp(tried, upstream, o, onFailover, { upstream: upstream.name, reason });
        if (last) throw noProviderError(tried.failed, retryAfter);
        continue;
      }
      if (failover && failedStatus(res.status)) {
        dropUpstreamAnswer(res);
        const after = retryAfterMs(res.headers['retry-after']);
        if (after !== undefined) retryAfter = Math.min(retryAfter ?? after, after);
        giveUp(
          tried,
          upstream,
          o,
          onFailover,
          { upstream: upstream.name, reason: 'status', status: res.status },
          after,
        );
        if (last) throw noProviderError(tried.failed, retryAfter);
        continue;
      }
      // upstreamResponseHeaders leaves lower-case names and no undefined value: adopted, not copied.
      const status = res.status;
      const answerHeaders = upstreamResponseHeaders(res.headers);
      o.sessions?.answer(ctx, answerHeaders);
      try {
        // A promise only when a small answer is read whole (no async frame around the read).
        const body = answerBody(ctx, res);
        const answer = body instanceof Promise ? await body : body;
        // A stream that ends or fails before its first byte gave the client nothing: the next may answer.
        const first =
          failover && answer instanceof Readable
            ? await firstBytes(answer, o.firstByteTimeoutMs ?? 120000, signal)
            : 'data';
        if (signal.aborted) {
          if (answer instanceof Readable) answer.destroy();
          throw new GatewayError('bad_request', 'Request aborted by the client');
        }
        if (first !== 'data') {
          (answer as Readable).destroy();
          giveUp(tried, upstream, o, onFailover, {
            upstream: upstream.name,
            reason: first === 'timeout' ? 'timeout' : 'broken',
          });
          if (last) throw noProviderError(tried.failed, retryAfter);
          continue;
        }
        ctx.state.answer = new Answer(ctx, {
          status,
          headers: answerHeaders,
          headersNormalised: true,
          body: answer,
          cancel: signal,
          // Only a stream is read later (a small answer is in already): no bound made for nothing.
          readTimeout:
            answer instanceof Readable ? wholeReadTimeout(upstream.name, o.timeoutMs ?? res.timeoutMs) : undefined,
        });
      } catch (err) {
        // The upstream's deadline passed while the body was read: a timeout (504), not a cut-short answer.
        const cause = (err as { cause?: unknown }).cause;
        const timedOut = isUninspectable(err) && cause instanceof GatewayError && cause.kind === 'upstream_timeout';
        if (!timedOut && !isUninspectable(err)) throw err;
        // Read whole, nothing of it reached the client: the next upstream may answer instead.
        if (failover && !signal.aborted) {
          giveUp(tried, upstream, o, onFailover, { upstream: upstream.name, reason: timedOut ? 'timeout' : 'broken' });
          if (last) throw noProviderError(tried.failed, retryAfter);
          continue;
        }
        if (timedOut) throw cause;
        // Cut short while read whole: the stages' readers refuse it, and it is never sent as a success.
        ctx.state.answer = Answer.broken(ctx, { status, headers: answerHeaders, headersNormalised: true }, err);
      }
      tried.served = upstream.name;
      if (failover) recovered(upstream);
      return;
    } finally {
      o.observe(upstream.name, (performance.now() - started) / 1000);
    }
  }
}

/** An upstream given up on: recorded, cooled down, reported (`after`: its Retry-After, ms). */
function giveUp(
  tried: ProvidersTried,
  upstream: HttpUpstream,
  o: HttpProxyOptions,
  onFailover: OnFailover | undefined,
  failure: ProviderFailure,
  after?: number,
): void {
  tried.failed.push(failure);
  coolDown(upstream, o.cooldownMs, after);
  onFailover?.(failure);
}

/** A streamed answer a stage reads whole must be in within the response timeout (else 504). */
function wholeReadTimeout(upstream: string, ms: number | undefined): ReadTimeout | undefined {
  if (ms === undefined) return undefined;
  return {
    ms,
    error: () =>
      new GatewayError('upstream_timeout', `Upstream did not send its whole answer within ${ms} ms`, {
        details: { upstream, timeout_ms: ms },
      }),
  };
}

/**
 * The headers and body for one upstream: its own name of the model (`model_map`) when it has one
 * for the request's; the request as the stages left it otherwise.
 */
function providerRequest(
  ctx: GatewayContext,
  upstream: HttpUpstream,
  headers: Record<string, string | string[]>,
  body: Buffer | string,
): { headers: Record<string, string | string[]>; body: Buffer | string } {
  if (!upstream.providerModel) return { headers, body };
  // The parsed body as the stages left it, unless a JSON-RPC message replaced it (then the bytes say).
  const json = ctx.state.json !== undefined && bodyChangeOf(ctx) !== 'rpc' ? ctx.state.json : parseJson(body);
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return { headers, body };
  const model = (json as { model?: unknown }).model;
  const renamed = typeof model === 'string' ? upstream.providerModel(model) : undefined;
  if (renamed === undefined) return { headers, body };
  // A copy: the next upstream of the list (and the audit trail) see the client's request.
  return {
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ ...(json as Record<string, unknown>), model: renamed }),
  };
}

function parseJson(body: Buffer | string): unknown {
  try {
    return JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Waits for a streamed answer's first bytes and puts them back: `data` once they came, `ended`
 * when the stream ended or failed first (or the client went away), `timeout` when none came
 * within `ms` (a provider that sent its headers and nothing else, or hangs). The stream is left
 * paused: every reader of an answer resumes it (a `data` listener alone would not).
 */
function firstBytes(body: Readable, ms: number, signal: ClientAbort): Promise<'data' | 'ended' | 'timeout'> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => done('timeout'), ms);
    const done = (outcome: 'data' | 'ended' | 'timeout'): void => {
      clearTimeout(timer);
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('close', onEnd);
      body.off('error', onEnd);
      signal.off('abort', onEnd);
      if (outcome === 'timeout') body.pause();
      resolve(outcome);
    };
    const onData = (chunk: Buffer): void => {
      // Paused first, so the chunk put back waits for whoever reads the answer.
      body.pause();
      body.unshift(chunk);
      done('data');
    };
    const onEnd = (): void => done('ended');
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('close', onEnd);
    body.once('error', onEnd);
    signal.once('abort', onEnd);
  });
}

/** The client's body, as it sent it. */
async function requestBody(ctx: GatewayContext): Promise<Buffer | null> {
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
function answerBody(
  ctx: GatewayContext,
  res: HttpForwardResponse,
): Buffer | HttpForwardResponse['body'] | null | Promise<Buffer> {
  if (noBodyStatus.has(res.status) || ctx.method === 'HEAD') {
    if (!res.whole) res.body.resume();
    return null;
  }
  // Small, and in whole already (the upstream's own read, runtime/upstreams/answer-handler.ts).
  if (res.whole) return res.whole;
  const type = res.headers['content-type'];
  const sse = typeof type === 'string' && type.toLowerCase().startsWith('text/event-stream');
  const length = res.headers['content-length'];
  if (!sse && isSmall(length)) return readWhole(res.body, bufferLimit, undefined, Number(length));
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
