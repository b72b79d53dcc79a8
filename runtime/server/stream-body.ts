/**
 * Writing a streamed body (an SSE answer, a proxied download). Koa writes one with
 * stream.pipeline, which builds an AbortController per response and aborts it when done, and
 * that abort builds a DOMException with a stack trace: measured ~6% of the CPU of a streamed
 * chat answer through the safety filter. Here the body is piped instead, with what pipeline
 * gave on top of pipe: an error of the body cuts the connection (the client must see a truncated
 * answer, not a complete one). Koa's body setter already destroys the body when the response
 * finishes or closes (a client that went away cancels the upstream).
 */
import { Readable } from 'node:stream';
import type { Context } from 'koa';

/** Statuses whose response has no body (Koa ends them without one). */
const bodiless = new Set([204, 205, 304]);

/** Writes `ctx.body` if it is a stream (and tells Koa not to); false when Koa should respond as usual. */
export function respondWithStream(ctx: Context): boolean {
  const body = ctx.body;
  if (!(body instanceof Readable) || ctx.respond === false) return false;
  if (ctx.method === 'HEAD' || bodiless.has(ctx.status) || !ctx.writable) return false;
  ctx.respond = false;
  const res = ctx.res;
  body.on('error', () => res.destroy());
  body.pipe(res);
  return true;
}
