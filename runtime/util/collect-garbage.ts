/**
 * A way to ask V8 for a full garbage collection without `node --expose-gc`.
 *
 * Why it is needed: V8 collects when allocation pressure asks for it, not when the process goes
 * idle. After a burst the heap keeps its garbage (and the ArrayBuffers it references, whose memory
 * lives outside the heap) for as long as nothing is allocated: measured on the embedding service,
 * 220 MB over the baseline after a minute of idle time, of which a collection returned 90 MB.
 *
 * How: V8 installs `gc` in every context created while its `--expose-gc` flag is set. The flag is
 * set, one new context made (vm), its `gc` kept, and the flag cleared again at once, so that no
 * other context (the main one, or a `vm` context of the application) sees a `gc` global. Checked
 * on Node 20 in the main thread and in worker threads (test/runtime/idle-trim.test.ts). Guarded:
 * if the flag cannot be set, or a later Node stops exposing `gc` this way, the result is
 * undefined and callers do without (the idle trim then reports itself unavailable).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8's gc extension: a synchronous full collection, or `execution: 'async'` (resolves when done). */
export type CollectGarbage = (options?: { type?: 'major' | 'minor'; execution?: 'sync' | 'async' }) => unknown;

let obtained: CollectGarbage | null | undefined;

export function garbageCollector(): CollectGarbage | undefined {
  if (obtained !== undefined) return obtained ?? undefined;
  const exposed = (globalThis as { gc?: CollectGarbage }).gc;
  if (typeof exposed === 'function') {
    obtained = exposed;
    return exposed;
  }
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('typeof gc === "function" ? gc : undefined');
    obtained = typeof gc === 'function' ? (gc as CollectGarbage) : null;
  } catch {
    obtained = null;
  } finally {
    try {
      setFlagsFromString('--no-expose-gc');
    } catch {
      // the flag stays set: later contexts would see gc, which is harmless
    }
  }
  return obtained ?? undefined;
}
