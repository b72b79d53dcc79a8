/**
 * Forwarding to an HTTP upstream: the request goes out with the original (or re-serialised)
 * body; the answer comes back streamed. Response hooks, when registered, rewrite a JSON answer
 * as a whole and an SSE answer event by event.
 */
import type { Readable } from 'node:stream';
import {
  ClientAbort,
  type GatewayContext,
  type HttpForwardResponse,
  type HttpUpstream,
  type PluginEnv,
  readBody,
  type SseFilter,
} from '../../runtime/index.ts';
import { copyResponseHeaders, upstreamRequestHeaders } from './headers.ts';
import { transformJsonBody } from './hooks.ts';
import { rpcHookFilter } from './rpc-sse.ts';
import { SseFilterTransform } from './sse.ts';

export interface HttpProxyOptions {
  headerNames: string[];
  path?: string;
  timeoutMs?: number;
  logger: Logger;
}

type Logger = PluginEnv['logger'];

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
    });
  } finally {
    ClientAbort.unwatch(ctx.res);
  }
  await answer(ctx, res, o.logger);
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

async function answer(ctx: GatewayContext, res: HttpForwardResponse, logger: Logger): Promise<void> {
  const type = String(res.headers['content-type'] ?? '').toLowerCase();
  const rpcHooks = ctx.state.rpcResponseHooks ?? [];
  const jsonHooks = ctx.state.responseJsonHooks ?? [];
  const encoded = res.headers['content-encoding'] !== undefined && res.headers['content-encoding'] !== 'identity';
  const sse = type.startsWith('text/event-stream');

  if (noBodyStatus.has(res.status) || ctx.method === 'HEAD') {
    res.body.resume();
    copyResponseHeaders(ctx, res.headers, false);
    ctx.status = res.status;
    ctx.body = null;
    return;
  }

  const hookable = (rpcHooks.length > 0 || jsonHooks.length > 0) && !encoded && type.includes('json');
  if (!sse && (hookable || isSmall(res.headers['content-length']))) {
    // Small answers are read whole and written in one go: cheaper than piping a stream (no
    // pipeline, no end-of-stream bookkeeping) and they go out in one write with the headers.
    const raw = await readAll(res.body);
    if (!hookable) {
      copyResponseHeaders(ctx, res.headers, false);
      ctx.status = res.status;
      ctx.body = raw;
      return;
    }
    // Hooks run before anything is written, so a hook's GatewayError is rendered normally.
    const text = raw.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    let body = parsed;
    let changed = false;
    if (parsed !== undefined && rpcHooks.length > 0) {
      const out = await transformJsonBody(parsed, rpcHooks, ctx);
      if (out.responses.length === 1) ctx.state.rpcResponse = out.responses[0];
      if (out.responses.length > 0) {
        body = out.body;
        changed = true;
      }
    }
    if (parsed !== undefined) {
      for (const hook of jsonHooks) {
        const next = await hook(body, ctx);
        if (next !== body) {
          body = next;
          changed = true;
        }
      }
    }
    copyResponseHeaders(ctx, res.headers, changed);
    ctx.status = res.status;
    ctx.body = changed ? Buffer.from(JSON.stringify(body)) : raw;
    return;
  }

  const filters: SseFilter[] = [];
  if (sse && !encoded) {
    if (rpcHooks.length > 0) filters.push(rpcHookFilter(rpcHooks, ctx, rpcEvents(ctx, logger)));
    for (const make of ctx.state.sseFilters ?? []) filters.push(make(ctx));
  }
  copyResponseHeaders(ctx, res.headers, filters.length > 0);
  ctx.status = res.status;
  if (sse) streamEvents(ctx);
  if (filters.length > 0) {
    const transform = new SseFilterTransform(filters, () => {
      res.body.unpipe(transform);
      res.body.destroy();
    });
    res.body.once('error', (err) => transform.destroy(err));
    // The client went away (Koa destroys the body): cancel the upstream request too.
    transform.once('close', () => {
      if (!res.body.destroyed) res.body.destroy();
    });
    ctx.body = res.body.pipe(transform);
    return;
  }
  ctx.body = res.body;
}

function rpcEvents(ctx: GatewayContext, logger: Logger) {
  let count = 0;
  return {
    response(msg: Record<string, unknown>) {
      count++;
      // Published only while there is exactly one response on the stream.
      if (count === 1) ctx.state.rpcResponse = msg;
      else delete ctx.state.rpcResponse;
    },
    hookError(err: unknown) {
      logger.error({ err, request_id: ctx.state.requestId }, 'response hook failed on an SSE event');
    },
  };
}

/** SSE must reach the client event by event: no socket timeout, no Nagle, no buffering. */
function streamEvents(ctx: GatewayContext): void {
  // ctx.req.socket is gone once the request body was consumed; the response holds the socket.
  const socket = ctx.res.socket ?? ctx.req.socket;
  socket?.setTimeout(0);
  socket?.setNoDelay(true);
  (ctx as { compress?: boolean }).compress = false;
  ctx.set('X-Accel-Buffering', 'no');
}

/** Answers up to this size (by their Content-Length) are buffered rather than streamed. */
const bufferLimit = 64 * 1024;

function isSmall(length: string | string[] | undefined): boolean {
  if (typeof length !== 'string') return false;
  const n = Number(length);
  return n >= 0 && n <= bufferLimit;
}

/** Reads a stream whole (event listeners: cheaper than async iteration for a chunk or two). */
function readAll(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    stream.once('error', reject);
  });
}
