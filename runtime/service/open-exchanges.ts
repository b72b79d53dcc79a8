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

export class OpenExchanges {
  private readonly open = new Map<ServerResponse, { ctx: GatewayContext; dialect: Dialect }>();
  private draining = false;

  get size(): number {
    return this.open.size;
  }

  /** Tracks a request until `done` is called (when its response closes); `dialect` is its service's. */
  add(ctx: GatewayContext, dialect: Dialect): void {
    this.open.set(ctx.res, { ctx, dialect });
    if (this.draining) closeAfterAnswer(ctx.res);
  }

  done(res: ServerResponse): void {
    this.open.delete(res);
  }

  /** From now on, every answer not started yet closes its connection after it. */
  startDraining(): void {
    this.draining = true;
    for (const res of this.open.keys()) closeAfterAnswer(res);
  }

  /**
   * The drain deadline: answers what is still open (see above), tells `onAnswered` (the access
   * log), and resolves once those answers are out, or after `flushMs`.
   */
  async answerRemaining(onAnswered: (ctx: GatewayContext) => void): Promise<number> {
    const flushed: Promise<void>[] = [];
    let answered = 0;
    for (const [res, { ctx, dialect }] of this.open) {
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
