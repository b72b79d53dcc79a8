/**
 * The response deadline of one upstream request, on a native timer. undici's own headers and body
 * timeouts above one second run on a coarse clock that ticks every ~0.5 s, so a 1.5 s timeout
 * fired up to ~0.5 s late; this one fires within a few ms of its setting. It ends the request
 * (`onAbort`) when the deadline passes or when the caller's own signal aborts, whichever comes
 * first: with the timeout error, or with an AbortError for the caller.
 */
import type { ClientAbort } from '../util/client-abort.ts';

type CallerSignal = AbortSignal | ClientAbort;

export class Deadline {
  private aborted = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly onCallerAbort = () => this.abort(callerAbortError());

  constructor(
    ms: number,
    private readonly caller: CallerSignal | undefined,
    timeoutError: () => Error,
    private readonly onAbort: (reason: Error) => void,
  ) {
    this.timer = setTimeout(() => this.abort(timeoutError()), ms);
    if (!caller) return;
    if (caller.aborted) this.abort(callerAbortError());
    else if (isAbortSignal(caller)) caller.addEventListener('abort', this.onCallerAbort, { once: true });
    // `on`, not `once` (no wrapper per request): clear() removes it, and abort() runs once.
    else caller.on('abort', this.onCallerAbort);
  }

  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.clear();
    this.onAbort(reason);
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

function callerAbortError(): Error {
  const err = new Error('Request aborted by the client');
  err.name = 'AbortError';
  return err;
}
