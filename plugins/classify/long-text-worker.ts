/**
 * Classifies long texts off the event loop, in one worker thread, bounded (the linear-features
 * model's scores, ml/linear-worker.ts; the set's classifiers that answer at once, set-worker.ts): at most `maxWaiting` texts and `maxWaitingChars` characters sent
 * and not answered (more fail at once: each text is copied to the worker), each answered within
 * `timeoutMs` (else the worker is terminated and every text it held
 * fails). A failure is the classifier's error, which fails its stage closed (classify's
 * `on_error`). The worker starts at the first long text and stays (unreferenced: it keeps no
 * process alive); one that exited or was terminated is replaced at the next.
 */
import type { Worker } from 'node:worker_threads';
import { startTypeScriptWorker } from '../../runtime/index.ts';

/** What the worker module receives for each text (`job`: anything else it needs, cloned). */
export interface LongTextJob {
  id: number;
  text: string;
  job?: unknown;
}

/** What it answers: the result, or the error's message. */
export type LongTextReply<R> = { id: number; result: R } | { id: number; error: string };

export interface LongTextLimits {
  /** Texts longer than this many characters go to the worker (shorter ones cost < ~2 ms on the loop). */
  chars: number;
  timeoutMs: number;
  maxWaiting: number;
  maxWaitingChars: number;
}

export const longTextLimits: LongTextLimits = {
  chars: 16 * 1024,
  timeoutMs: 10_000,
  maxWaiting: 64,
  // Four of the safety filter's largest bodies (4 MiB) at once: ~32 MiB of UTF-16 in the worker.
  maxWaitingChars: 16 * 1024 * 1024,
};

interface Waiting<R> {
  chars: number;
  resolve: (result: R) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class LongTextWorker<R> {
  #worker: Worker | undefined;
  readonly #waiting = new Map<number, Waiting<R>>();
  #nextId = 1;
  #waitingChars = 0;
  /** Texts sent to the worker so far (the tests count them). */
  sent = 0;

  /**
   * `module`: the worker's .ts module (startTypeScriptWorker), which answers each LongTextJob with
   * a LongTextReply; `data`: its workerData; `what`: what it does, for the errors.
   */
  constructor(
    private readonly module: URL,
    private readonly data: unknown,
    private readonly what: string,
    readonly limits: LongTextLimits = longTextLimits,
  ) {}

  /** The worker's result for `text` (and `job`). */
  run(text: string, job?: unknown): Promise<R> {
    if (
      this.#waiting.size >= this.limits.maxWaiting ||
      this.#waitingChars + text.length > this.limits.maxWaitingChars
    ) {
      const bound = `at most ${this.limits.maxWaiting} texts, ${this.limits.maxWaitingChars} characters`;
      return Promise.reject(new Error(`too many long texts waiting for the ${this.what} (${bound})`));
    }
    const worker = this.#started();
    const id = this.#nextId++;
    this.sent++;
    return new Promise<R>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#fail(new Error(`the ${this.what} did not answer for a long text within ${this.limits.timeoutMs} ms`));
      }, this.limits.timeoutMs);
      this.#waiting.set(id, { chars: text.length, resolve, reject, timer });
      this.#waitingChars += text.length;
      worker.ref();
      worker.postMessage({ id, text, job } satisfies LongTextJob);
    });
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    this.#fail(new Error(`the ${this.what} was closed`));
    await worker?.terminate();
  }

  #started(): Worker {
    if (this.#worker) return this.#worker;
    const worker = startTypeScriptWorker(this.module, { workerData: this.data });
    worker.unref();
    worker.on('message', (reply: LongTextReply<R>) => {
      const waiting = this.#waiting.get(reply.id);
      if (!waiting) return;
      this.#waiting.delete(reply.id);
      this.#waitingChars -= waiting.chars;
      clearTimeout(waiting.timer);
      if (this.#waiting.size === 0) worker.unref();
      if ('error' in reply) waiting.reject(new Error(`the ${this.what} failed on a long text: ${reply.error}`));
      else waiting.resolve(reply.result);
    });
    worker.on('error', (err) => this.#fail(new Error(`the ${this.what}'s worker failed: ${err.message}`)));
    worker.once('exit', () => {
      if (this.#worker === worker) this.#fail(new Error(`the ${this.what}'s worker exited`));
    });
    this.#worker = worker;
    return worker;
  }

  /** Fails every text waiting and drops the worker (terminated; a new one starts at the next text). */
  #fail(err: Error): void {
    const worker = this.#worker;
    this.#worker = undefined;
    this.#waitingChars = 0;
    for (const [id, waiting] of this.#waiting) {
      this.#waiting.delete(id);
      clearTimeout(waiting.timer);
      waiting.reject(err);
    }
    void worker?.terminate();
  }
}
