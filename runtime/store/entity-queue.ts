/**
 * The store's write queue (PostgreSQL): at most `limit` writing transactions at once; the others
 * wait here, in the process, holding no connection. Without it a burst of writes would take every
 * connection of the pool and the rest (reads included) would time out waiting for one.
 *
 * First come, first served. A writer still waiting after `timeoutMs` gives up with
 * `StorageBusyError` (503 `storage_busy`, Retry-After), as a pool that hands out no connection
 * in time does: the database is not keeping up.
 */
import { StorageBusyError } from './entity-errors.ts';

export interface WriteQueue {
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Writers waiting for their turn. */
  readonly waiting: number;
}

interface Waiter {
  start(): void;
  timer: NodeJS.Timeout;
}

export function createWriteQueue(limit: number, timeoutMs: number): WriteQueue {
  let running = 0;
  const waiters: Waiter[] = [];

  const release = () => {
    const next = waiters.shift();
    if (!next) {
      running--;
      return;
    }
    clearTimeout(next.timer);
    next.start(); // the slot passes to the next writer
  };

  const turn = () =>
    new Promise<void>((resolve, reject) => {
      if (running < limit) {
        running++;
        resolve();
        return;
      }
      const waiter: Waiter = {
        start: resolve,
        timer: setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new StorageBusyError(`no write slot became free within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      waiters.push(waiter);
    });

  return {
    async run<T>(fn: () => Promise<T>): Promise<T> {
      await turn();
      try {
        return await fn();
      } finally {
        release();
      }
    },
    get waiting() {
      return waiters.length;
    },
  };
}
