/**
 * An extraction worker thread (extract-pool.ts): HTML in, title and text out, one page at a time.
 * Readability on a hostile page can run for minutes; here it blocks only this thread, which the
 * pool terminates when the page's time is up.
 */
import { parentPort } from 'node:worker_threads';
import { htmlToText } from './extract.ts';

export interface ExtractRequest {
  id: number;
  html: string;
}

export type ExtractReply =
  | { id: number; title: string; text: string }
  | { id: number; error: string }
  | { ready: true };

const port = parentPort;
if (!port) throw new Error('extract-worker.ts runs as a worker thread');
port.on('message', (request: ExtractRequest) => {
  let reply: ExtractReply;
  try {
    reply = { id: request.id, ...htmlToText(request.html) };
  } catch (err) {
    reply = { id: request.id, error: (err as Error)?.message ?? String(err) };
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true } satisfies ExtractReply);
