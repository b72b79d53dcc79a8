/**
 * One upstream request's answer as undici delivers it, through its dispatch handler rather than
 * `request`: a small answer (by Content-Length, not an event stream) is collected whole and handed
 * over complete, with no body stream at all; any other answer is handed over at its headers with
 * a stream of its body (a full stream pauses the socket until it is read). Why not `request`: its
 * handler makes an async resource, a body stream and an abort listener per request, ~5 µs per
 * small answer, a tenth of what a Koa + undici proxy costs in all (docs/performance.md).
 *
 * The caller bounds it: `abort(reason)` ends the request with `reason` (the deadline's timeout,
 * the client going away), and `idleMs` cuts a body that sends nothing for that long.
 */
import { Readable } from 'node:stream';
import { type Dispatcher, util } from 'undici';
import type { HttpForwardResponse } from './types.ts';

/** Answers up to this size (by Content-Length, not event streams) are collected whole. */
export const smallAnswerBytes = 64 * 1024;

export interface AnswerHandlerOptions {
  method: string;
  /** The request's body, destroyed when the request fails (as undici's own handler does). */
  requestBody?: unknown;
  /** The response timeout the request runs under (HttpForwardResponse.timeoutMs). */
  timeoutMs: number;
  /** A body that sends nothing for this long is cut with `idleError()` (0: never). */
  idleMs: number;
  idleError: () => Error;
  /** Called once: with the answer (at its headers, or complete when small), or with why there is none. */
  settle: (err: Error | null, answer?: HttpForwardResponse) => void;
}

type Abort = (reason: Error) => void;

export class AnswerHandler implements Dispatcher.DispatchHandler {
  #abort: Abort | undefined;
  /** Aborted before undici gave the means to (before the connection was assigned). */
  #reason: Error | undefined;
  #settled = false;
  #ended = false;
  #status = 0;
  #headers: Record<string, string | string[]> | undefined;
  /** A small answer's chunks as they come. */
  #chunks: Buffer[] | undefined;
  #stream: Readable | undefined;
  #idle: NodeJS.Timeout | undefined;

  constructor(private readonly o: AnswerHandlerOptions) {}

  /** Ends the request with `reason` (an answer's stream fails with it). */
  abort(reason: Error): void {
    if (this.#ended) return;
    if (this.#abort) this.#abort(reason);
    else this.#reason = reason;
  }

  onConnect(abort: Abort): void {
    if (this.#reason) abort(this.#reason);
    else this.#abort = abort;
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (status < 200) return true; // 1xx: informational, the answer follows
    const headers = util.parseHeaders(rawHeaders) as Record<string, string | string[]>;
    this.#status = status;
    this.#headers = headers;
    if (this.o.idleMs > 0) this.#idle = setTimeout(() => this.abort(this.o.idleError()), this.o.idleMs);
    // HEAD, 204 and 304 answers have no body whatever their Content-Length says.
    if (this.o.method !== 'HEAD' && status !== 204 && status !== 304 && isSmallAnswer(headers)) {
      this.#chunks = [];
      return true;
    }
    const stream = new Readable({
      // undici's own body stream holds as much before it pauses the socket.
      highWaterMark: 64 * 1024,
      read: () => resume(),
      destroy: (err, callback) => {
        // Left before its end (the client went away, a reader gave up): the request is cut.
        if (!this.#ended) this.abort(err ?? abortError());
        callback(err);
      },
    });
    this.#stream = stream;
    this.#settle(null, { status, headers, body: stream, timeoutMs: this.o.timeoutMs });
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.#idle?.refresh();
    if (this.#chunks) {
      this.#chunks.push(chunk);
      return true;
    }
    return this.#stream!.push(chunk);
  }

  onComplete(): void {
    this.#ended = true;
    clearTimeout(this.#idle);
    const chunks = this.#chunks;
    if (!chunks) {
      this.#stream!.push(null);
      return;
    }
    const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    this.#settle(null, wholeAnswer(this.#status, this.#headers!, whole, this.o.timeoutMs));
  }

  onError(err: Error): void {
    this.#ended = true;
    clearTimeout(this.#idle);
    const body = this.o.requestBody;
    if (body instanceof Readable && !body.destroyed) body.on('error', noop).destroy(err);
    if (this.#stream) {
      // In a microtask, as undici does: what the stream holds is handed on before it fails.
      const stream = this.#stream;
      // A listener of its own: a reader that only drains it must not bring the process down.
      queueMicrotask(() => stream.on('error', noop).destroy(err));
    } else if (this.#chunks) {
      // A small answer cut after its headers: the answer is handed over, its body fails when read
      // (as a stream read as it came would), so callers tell a cut answer from no answer.
      this.#settle(null, {
        status: this.#status,
        headers: this.#headers!,
        body: failingBody(err),
        timeoutMs: this.o.timeoutMs,
      });
    } else this.#settle(err);
  }

  #settle(err: Error | null, answer?: HttpForwardResponse): void {
    if (this.#settled) return;
    this.#settled = true;
    this.o.settle(err, answer);
  }
}

/** Small by Content-Length (1 byte to smallAnswerBytes) and not an event stream. */
function isSmallAnswer(headers: Record<string, string | string[] | undefined>): boolean {
  const length = headers['content-length'];
  if (typeof length !== 'string') return false;
  const type = headers['content-type'];
  if (typeof type === 'string' && type.toLowerCase().startsWith('text/event-stream')) return false;
  const n = Number(length);
  return n > 0 && n <= smallAnswerBytes;
}

/** An answer read whole: its body as a stream is made only for a caller that asks for one. */
export function wholeAnswer(
  status: number,
  headers: HttpForwardResponse['headers'],
  whole: Buffer,
  timeoutMs: number | undefined,
): HttpForwardResponse {
  let body: Readable | undefined;
  return {
    status,
    headers,
    whole,
    timeoutMs,
    get body(): Readable {
      body ??= new Readable({
        read() {
          this.push(whole);
          this.push(null);
        },
      });
      return body;
    },
  };
}

/** A body that fails with `err` once it is read (not before: nobody may be listening yet). */
function failingBody(err: Error): Readable {
  return new Readable({
    read() {
      this.destroy(err);
    },
  }).on('error', noop); // as undici's own: a reader that only drains it sees it close
}

function abortError(): Error {
  const err = new Error('The upstream answer was abandoned');
  err.name = 'AbortError';
  return err;
}

function noop(): void {}

/**
 * Runs `done` once the answer is over: at once for an answer that came whole (nothing more will
 * come, and its body stream may never be made), else when its body stream closes (read to its
 * end, dropped or failed). For counts held for the length of an answer (slots, active requests).
 */
export function whenAnswerEnds(res: HttpForwardResponse, done: () => void): void {
  if (res.whole) done();
  else res.body.once('close', done);
}
