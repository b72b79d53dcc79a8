/**
 * An abort signal that fires after `ms`, or when a parent signal aborts, whichever comes first.
 * Why not `AbortSignal.any([parent, AbortSignal.timeout(ms)])`: Node holds a timeout signal only
 * weakly, and a composite signal its sources too, so a timeout signal nobody else references can
 * be garbage-collected before it fires and the deadline silently never comes. Here the timer
 * holds the controller until `clear()`.
 */
export interface Deadline {
  signal: AbortSignal;
  /** True when it was the time that ran out (not the parent that aborted). */
  readonly expired: boolean;
  /** Stops the timer and detaches from the parent; call it when the work is done. */
  clear(): void;
}

export function deadline(ms: number, parent?: AbortSignal): Deadline {
  const controller = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    controller.abort(new DOMException(`deadline of ${ms} ms exceeded`, 'TimeoutError'));
  }, ms);
  const onAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) onAbort();
  else parent?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onAbort);
    },
  };
}
