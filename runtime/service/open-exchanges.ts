/**
 * The requests of a service not answered yet (a streamed body still flowing counts), and what a
 * graceful stop does with them. Once draining, every answer not started says `Connection: close`
 * (the client opens no further request on that connection, so none is cut). At the drain deadline
 * what is still open is answered rather than reset: `503 unavailable` in the route's dialect where
 * the status line was not sent; an event stream already started is ended cleanly (its client sees
 * the end of the stream, SSE has no other end); any other body already started is cut, so that a
 * truncated download never looks complete.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dialect } from '../dialects.ts';
import { GatewayError } from '../errors.ts';
import type { GatewayContext } from '../state.ts';

/** How long the last answers get to reach their clients before the connections are closed. */
const flushMs = 1000;

/** One open request: a node of the list OpenExchanges keeps. */
export interface Exchange {
  ctx: GatewayContext;
  dialect: Dialect;
  prev: Exchange | undefined;
  next: Exchange | undefined;
}

/**
 * A doubly linked list rather than a Map keyed by the response: the caller keeps the node it got
 * from `add` and gives it back to `done`, so no request object is hashed (giving a Node response
 * an identity hash on every request cost ~15% of the typed proxy's CPU per request: measured).
 */
export class OpenExchanges {
  private head: Exchange | undefined;
  private count = 0;
  private draining = false;

  get size(): number {
    return this.count;
  }

  /** Tracks a request until `done` is called with the node (when its response closes); `dialect` is its service's. */
  add(ctx: GatewayContext, dialect: Dialect): Exchange {
    const node: Exchange = { ctx, dialect, prev: undefined, next: this.head };
    if (this.head) this.head.prev = node;
    this.head = node;
    this.count++;
    if (this.draining) closeAfterAnswer(ctx.res);
    return node;
  }

  done(node: Exchange): void {
    if (node.prev) node.prev.next = node.next;
    else if (this.head === node) this.head = node.next;
    else return; // removed already
    if (node.next) node.next.prev = node.prev;
    node.prev = node.next = undefined;
    this.count--;
  }

  private *nodes(): Generator<Exchange> {
    for (let n = this.head; n; n = n.next) yield n;
  }

  /** From now on, every answer not started yet closes its connection after it. */
  startDraining(): void {
    this.draining = true;
    for (const { ctx } of this.nodes()) closeAfterAnswer(ctx.res);
  }

  /**
   * The drain deadline: answers what is still open (see above), tells `onAnswered` (the access
   * log), and resolves once those answers are out, or after `flushMs`.
   */
  async answerRemaining(onAnswered: (ctx: GatewayContext) => void): Promise<number> {
    const flushed: Promise<void>[] = [];
    let answered = 0;
    for (const { ctx, dialect } of [...this.nodes()]) {
      const res = ctx.res;
      if (res.writableEnded) continue;
      flushed.push(new Promise((resolve) => res.once('close', resolve)));
      answered++;
      if (!res.headersSent) answerUnavailable(ctx, ctx.state?.dialect ?? dialect);
      else if (isEventStream(res)) endStream(ctx);
      else res.destroy();
      onAnswered(ctx);
    }
    if (flushed.length === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(flushed),
      new Promise((resolve) => {
        timer = setTimeout(resolve, flushMs);
      }),
    ]);
    clearTimeout(timer);
    return answered;
  }
}

function closeAfterAnswer(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('Connection', 'close');
}

function answerUnavailable(ctx: GatewayContext, dialect: Dialect): void {
  const err = new GatewayError('unavailable', 'The service is shutting down; the request was not completed', {
    headers: { 'Retry-After': '1' },
  });
  const rendered = dialect.render(err, ctx.state?.rpc?.id);
  const text = JSON.stringify(rendered.body);
  const res = ctx.res;
  for (const name of res.getHeaderNames()) {
    if (name.startsWith('content-') || name === 'transfer-encoding') res.removeHeader(name);
  }
  res.statusCode = rendered.status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.setHeader('Retry-After', '1');
  res.setHeader('Connection', 'close');
  res.end(text);
}

function isEventStream(res: ServerResponse): boolean {
  const type = res.getHeader('content-type');
  return (
    typeof type === 'string' && type.toLowerCase().startsWith('text/event-stream') && !res.hasHeader('content-length')
  );
}

/** Stops the body piped into the response and ends the response where the last write stopped. */
function endStream(ctx: GatewayContext): void {
  const body = ctx.body as Readable | undefined;
  if (body && typeof body.unpipe === 'function') {
    body.unpipe(ctx.res);
    body.on('error', () => {}).destroy();
  }
  ctx.res.end();
}
