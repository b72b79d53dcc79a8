/**
 * Scores long texts for the linear-features model off the event loop, in one worker thread
 * (linear-worker.ts), bounded: at most `maxWaiting` texts and `maxWaitingChars` characters sent
 * and not answered (more fail at once: each text is copied to the worker), each answered within
 * `timeoutMs` (else the worker is terminated and every text it held
 * fails). A failure is the classifier's error, which fails its stage closed (classify's
 * `on_error`). The worker starts at the first long text and stays (unreferenced: it keeps no
 * process alive); one that exited or was terminated is replaced at the next.
 */
import type { Worker } from 'node:worker_threads';
import { startTypeScriptWorker } from '../../../runtime/index.ts';
import type { LinearJob, LinearReply, LinearWorkerData } from './linear-worker.ts';

const WORKER_MODULE = new URL('./linear-worker.ts', import.meta.url);

export interface LongTextLimits {
  /** Texts longer than this many characters go to the worker (shorter ones cost < ~2 ms). */
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

interface Waiting {
  chars: number;
  resolve: (logits: Float64Array) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class LongTextScorer {
  #worker: Worker | undefined;
  readonly #waiting = new Map<number, Waiting>();
  #nextId = 1;
  #waitingChars = 0;
  /** Texts sent to the worker so far (the tests count them). */
  sent = 0;

  constructor(
    private readonly data: LinearWorkerData,
    readonly limits: LongTextLimits = longTextLimits,
  ) {}

  /** The model's logits for `text`, computed in the worker. */
  logits(text: string): Promise<Float64Array> {
    if (
      this.#waiting.size >= this.limits.maxWaiting ||
      this.#waitingChars + text.length > this.limits.maxWaitingChars
    ) {
      const bound = `at most ${this.limits.maxWaiting} texts, ${this.limits.maxWaitingChars} characters`;
      return Promise.reject(new Error(`too many long texts waiting for the model (${bound})`));
    }
    const worker = this.#started();
    const id = this.#nextId++;
    this.sent++;
    return new Promise<Float64Array>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#fail(new Error(`the model did not score a long text within ${this.limits.timeoutMs} ms`));
      }, this.limits.timeoutMs);
      this.#waiting.set(id, { chars: text.length, resolve, reject, timer });
      this.#waitingChars += text.length;
      worker.ref();
      worker.postMessage({ id, text } satisfies LinearJob);
    });
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    this.#fail(new Error('the classifier was closed'));
    await worker?.terminate();
  }

  #started(): Worker {
    if (this.#worker) return this.#worker;
    const worker = startTypeScriptWorker(WORKER_MODULE, { workerData: this.data });
    worker.unref();
    worker.on('message', (reply: LinearReply) => {
      const waiting = this.#waiting.get(reply.id);
      if (!waiting) return;
      this.#waiting.delete(reply.id);
      this.#waitingChars -= waiting.chars;
      clearTimeout(waiting.timer);
      if (this.#waiting.size === 0) worker.unref();
      if ('error' in reply) waiting.reject(new Error(`the model failed on a long text: ${reply.error}`));
      else waiting.resolve(Float64Array.from(reply.logits));
    });
    worker.on('error', (err) => this.#fail(new Error(`the model's worker failed: ${err.message}`)));
    worker.once('exit', () => {
      if (this.#worker === worker) this.#fail(new Error("the model's worker exited"));
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
