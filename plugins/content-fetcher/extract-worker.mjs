// An extraction worker thread (extract-pool.ts): HTML in, title and text out, one page at a time.
// Readability on a hostile page can run for minutes; here it blocks only this thread, which the
// pool terminates when the page's time is up. Plain JavaScript on purpose: on Node 20 a worker
// that registers the TypeScript loader (tsx) goes through the loader thread it shares with the
// main thread, which was measured to stall the main event loop by 20-340 ms per worker start.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { htmlToText } from './extract.mjs';

// The lowest CPU priority for this thread only (Linux applies it per thread): on a busy machine the
// event loop of the service gets the CPU before a page being extracted.
try {
  setPriority(19);
} catch {
  // not permitted here: run at the normal priority
}

const port = parentPort;
if (!port) throw new Error('extract-worker.mjs runs as a worker thread');
port.on('message', (/** @type {{id: number, html: string}} */ request) => {
  let reply;
  try {
    reply = { id: request.id, ...htmlToText(request.html) };
  } catch (err) {
    reply = { id: request.id, error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true });
