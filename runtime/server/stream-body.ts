/**
 * Writing a streamed body (an SSE answer, a proxied download). Koa writes one with
 * stream.pipeline, which builds an AbortController per response and aborts it when done, and
 * that abort builds a DOMException with a stack trace: measured ~6% of the CPU of a streamed
 * chat answer through the safety filter. Here the body is piped instead, with what pipeline
 * gave on top of pipe: an error of the body cuts the connection (the client must see a truncated
 * answer, not a complete one) — unless nothing was sent yet (a stage held the first event back):
 * then the error is still answered in the route's dialect (502 for an upstream that cut its
 * stream). Koa's body setter already destroys the body when the response finishes or closes (a
 * client that went away cancels the upstream).
 */
import { Readable } from 'node:stream';
import type { Context } from 'koa';
import { GatewayError, isGatewayError } from '../errors.ts';
import type { GatewayContext } from '../state.ts';

/** Statuses whose response has no body (Koa ends them without one). */
const bodiless = new Set([204, 205, 304]);

/** Writes `ctx.body` if it is a stream (and tells Koa not to); false when Koa should respond as usual. */
export function respondWithStream(ctx: Context): boolean {
  const body = ctx.body;
  if (!(body instanceof Readable) || ctx.respond === false) return false;
  if (ctx.method === 'HEAD' || bodiless.has(ctx.status) || !ctx.writable) return false;
  ctx.respond = false;
  const res = ctx.res;
  body.on('error', (err) => {
    if (res.headersSent || !(ctx as unknown as GatewayContext).state.dialect) return res.destroy();
    answerError(ctx as unknown as GatewayContext, err);
  });
  body.pipe(res);
  return true;
}

/** The stream failed before its first byte went out: the status line is still ours to write. */
function answerError(ctx: GatewayContext, err: unknown): void {
  const gerr = isGatewayError(err)
    ? err
    : new GatewayError('upstream_error', 'The upstream closed its answer before it was complete', { cause: err });
  const rendered = ctx.state.dialect?.render(gerr, ctx.state.rpc?.id);
  if (!rendered) return;
  const res = ctx.res;
  const text = JSON.stringify(rendered.body);
  res.statusCode = rendered.status;
  // A trailer announced for the stream cannot come with an error of known length (Node refuses to
  // write one).
  for (const name of [
    'content-type',
    'content-length',
    'content-encoding',
    'transfer-encoding',
    'cache-control',
    'trailer',
  ]) {
    res.removeHeader(name);
  }
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}
