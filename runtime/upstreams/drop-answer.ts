/**
 * Letting go of an upstream answer nobody passes on (a retried or failed-over error answer): a
 * whole answer is read already; a streamed one is read to its end and dropped, so that its
 * connection goes back to the pool, or cut once it passes `limit` bytes or takes longer than `ms`
 * (a body that never ends), so that no socket is held for it. Its errors are swallowed: nobody
 * reads it.
 */
import type { HttpForwardResponse } from './types.ts';

export function dropUpstreamAnswer(res: HttpForwardResponse, limit = 64 * 1024, ms = 1000): void {
  if (res.whole) return;
  const body = res.body;
  body.on('error', () => {});
  let left = limit;
  const timer = setTimeout(() => body.destroy(), ms);
  timer.unref();
  body.on('data', (chunk: Buffer | string) => {
    left -= chunk.length;
    if (left < 0) body.destroy();
  });
  body.once('close', () => clearTimeout(timer));
  body.resume();
}
