/**
 * Counts the listeners put on an emitter for one event from now on (through `on`, which raw-body
 * and readers of a stream use): how a test tells a body taken from the buffer (none) from one read
 * as it arrives.
 */
import type { EventEmitter } from 'node:events';

export function countListenersAdded(emitter: EventEmitter, event: string): () => number {
  let n = 0;
  const on = emitter.on.bind(emitter);
  emitter.on = ((name: string | symbol, listener: (...args: unknown[]) => void) => {
    if (name === event) n++;
    return on(name, listener);
  }) as typeof emitter.on;
  return () => n;
}
