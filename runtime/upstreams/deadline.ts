/**
 * The response deadline of one upstream request, on a native timer. undici's own headers and body
 * timeouts above one second run on a coarse clock that ticks every ~0.5 s, so a 1.5 s timeout
 * fired up to ~0.5 s late; this one fires within a few ms of its setting. It is also the request's
 * signal for undici (an EventEmitter with `aborted`, like ClientAbort): it aborts when the deadline
 * passes or when the caller's own signal aborts, whichever comes first.
 */
import { EventEmitter } from 'node:events';
import type { Readable } from 'node:stream';
import type { ClientAbort } from '../util/client-abort.ts';

type CallerSignal = AbortSignal | ClientAbort;

export class Deadline extends EventEmitter {
  aborted = false;
  /** True when the deadline passed (rather than the caller aborting). */
  expired = false;
  /** What undici fails the request with (its body too): the timeout error once the deadline passed. */
  reason: Error | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly onCallerAbort = () => this.abort();

  constructor(
    readonly ms: number,
    private readonly caller: CallerSignal | undefined,
    timeoutError: () => Error,
  ) {
    super();
    this.timer = setTimeout(() => {
      this.expired = true;
      this.reason = timeoutError();
      this.abort();
    }, ms);
    if (!caller) return;
    if (caller.aborted) this.abort();
    else if (isAbortSignal(caller)) caller.addEventListener('abort', this.onCallerAbort, { once: true });
    // `on`, not `once` (no wrapper per request): clear() removes it, and abort() runs once.
    else caller.on('abort', this.onCallerAbort);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.clear();
    this.emit('abort');
  }

  /** Stops the timer and the watch on the caller's signal (the answer came in time). */
  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const caller = this.caller;
    if (!caller) return;
    if (isAbortSignal(caller)) caller.removeEventListener('abort', this.onCallerAbort);
    else caller.off('abort', this.onCallerAbort);
  }
}

function isAbortSignal(signal: CallerSignal): signal is AbortSignal {
  return typeof (signal as AbortSignal).addEventListener === 'function';
}

/**
 * `body_timeout_ms` on a native timer: the body is destroyed with `error()` when no chunk came for
 * `ms`. The chunks are seen where undici hands them to the stream (`push`), so that watching
 * neither reads the body nor changes how it flows. `deadline`: cleared when the body closes.
 */
export function watchBodyIdle(body: Readable, ms: number, error: () => Error, deadline?: Deadline): void {
  const timer = setTimeout(() => body.destroy(error()), ms);
  const push = body.push;
  body.push = function watchedPush(this: Readable, chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk === null) clearTimeout(timer);
    else timer.refresh();
    return push.call(this, chunk, encoding);
  };
  // `on`, not `once` (no wrapper): a stream closes once. The deadline (a small answer's) ends with the body too.
  body.on('close', () => {
    clearTimeout(timer);
    deadline?.clear();
  });
}
