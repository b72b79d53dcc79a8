/**
 * The tokenizer in a worker thread (token-counter.ts starts one per encoding per process): the
 * encoding's import evaluates its BPE ranks for 160-530 ms, and counting a hostile prompt takes
 * up to 25 ms; either on the main thread would hold every other request (a hot reload adding a
 * token-limit stage pays the import while serving).
 * Protocol: first one `TokenWorkerReady` (or `{ ready: false }` when gpt-tokenizer cannot be
 * loaded); then one `TokenReply` per `TokenJob`, in order, each counted with the bounded
 * algorithm of bounded-count.ts (the text arrives already cut to the stage's `exactChars`).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { type Counted, type CountFn, countPrefix, type EncodingModule, ordinaryCount } from './bounded-count.ts';

export interface TokenJob {
  id: number;
  text: string;
  exactChars: number;
  /** The text was cut: the request's prompt goes on past it. */
  more: boolean;
}

export type TokenReply = { id: number } & Counted;
export type TokenWorkerReady = { ready: true } | { ready: false; error: string };

const { encoding } = workerData as { encoding: string };
let count: CountFn;
try {
  count = ordinaryCount((await import(`gpt-tokenizer/encoding/${encoding}`)) as EncodingModule);
  parentPort?.postMessage({ ready: true } satisfies TokenWorkerReady);
} catch (err) {
  parentPort?.postMessage({ ready: false, error: (err as Error).message } satisfies TokenWorkerReady);
  process.exit(0);
}

parentPort?.on('message', (job: TokenJob) => {
  const counted = countPrefix(job.text, count, job.exactChars, job.more);
  parentPort?.postMessage({ id: job.id, ...counted } satisfies TokenReply);
});
