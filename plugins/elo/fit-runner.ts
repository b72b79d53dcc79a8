/**
 * Runs Bradley–Terry fits off the event loop (fit-worker.ts), bounded three ways: at most
 * `maxConcurrent` at once (more is 503 with Retry-After, at once: nothing queues behind a job that
 * may take seconds), at most `timeoutMs` each (then its worker is terminated: 504), and a fit
 * whose client went away is terminated too: terminating its thread is the only way to stop a
 * computation. A worker that finished a fit waits for the next one (starting one, with the
 * TypeScript loader, costs ~100 ms); a terminated one is replaced when next needed.
 */
import type { ServerResponse } from 'node:http';
import type { Worker } from 'node:worker_threads';
import { ClientAbort, GatewayError, startTypeScriptWorker } from '../../runtime/index.ts';
import type { FitJob, FitReply, FitWorkerData } from './fit-worker.ts';

const WORKER_MODULE = new URL('./fit-worker.ts', import.meta.url);

export interface FitLimits {
  maxConcurrent: number;
  timeoutMs: number;
  /** Old-generation heap of a worker, MiB: a fit that needs more fails alone. */
  memoryMb: number;
  /** Niceness of a worker's thread (0: the process's); see fit-worker.ts. */
  nice: number;
}

export type FitResult = Extract<FitReply, { ok: true }>;

export class FitRunner {
  private running = 0;
  /** Workers waiting for a fit (unreferenced: they keep no process alive). */
  private readonly idle: Worker[] = [];
  private closed = false;

  constructor(private readonly limits: FitLimits) {}

  /** Fits in a worker; `res` is the client's response, watched for the client going away. */
  run(job: FitJob, res: ServerResponse): Promise<FitResult> {
    if (this.closed) return Promise.reject(new GatewayError('unavailable', 'The leaderboard is shutting down'));
    if (this.running >= this.limits.maxConcurrent) {
      const message = `Too many leaderboard fits running (at most ${this.limits.maxConcurrent}); retry shortly`;
      return Promise.reject(new GatewayError('overloaded', message, { headers: { 'Retry-After': '1' } }));
    }
    if (res.destroyed) return Promise.reject(clientGone());
    this.running++;
    const worker = this.idle.pop() ?? this.spawn();
    worker.ref();
    const abort = ClientAbort.watch(res);
    return new Promise<FitResult>((resolve, reject) => {
      let settled = false;
      const settle = (keep: boolean, fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        abort.off('abort', onAbort);
        ClientAbort.unwatch(res);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
        this.running--;
        if (keep && !this.closed) {
          worker.unref();
          this.idle.push(worker);
        } else void worker.terminate();
        fn();
      };
      const stop = (err: Error) => settle(false, () => reject(err));
      const timer = setTimeout(() => {
        const message = `Bradley–Terry fit exceeded its time limit (${this.limits.timeoutMs} ms); ask for fewer bootstrap samples`;
        stop(new GatewayError('unavailable', message, { status: 504 }));
      }, this.limits.timeoutMs);
      const onAbort = () => stop(clientGone());
      const onMessage = (reply: FitReply) =>
        reply.ok ? settle(true, () => resolve(reply)) : stop(new Error(`Bradley–Terry fit failed: ${reply.error}`));
      const onError = (err: Error & { code?: string }) =>
        stop(
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? new GatewayError('unavailable', `Bradley–Terry fit needs more than ${this.limits.memoryMb} MiB`)
            : err,
        );
      const onExit = (code: number) => stop(new Error(`Bradley–Terry fit worker exited (code ${code})`));
      abort.once('abort', onAbort);
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
      worker.postMessage(job);
    });
  }

  /** Stops the waiting workers; running fits end with their requests (the graph drains first). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.idle.splice(0).map((w) => w.terminate()));
  }

  private spawn(): Worker {
    const worker = startTypeScriptWorker(WORKER_MODULE, {
      resourceLimits: { maxOldGenerationSizeMb: this.limits.memoryMb },
      workerData: { nice: this.limits.nice } satisfies FitWorkerData,
    });
    // A busy worker's errors are its fit's (run() listens); an idle one that fails is dropped on
    // exit, and an 'error' nobody listens to would take the process down.
    worker.on('error', () => {});
    worker.once('exit', () => {
      const at = this.idle.indexOf(worker);
      if (at >= 0) this.idle.splice(at, 1);
    });
    return worker;
  }
}

/** 499: the client closed the request (nginx's code); nobody reads this answer, the log does. */
function clientGone(): GatewayError {
  return new GatewayError('bad_request', 'Client closed the request', { status: 499 });
}
