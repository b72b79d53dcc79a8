/**
 * Runs Bradley–Terry fits off the event loop (fit-worker.ts), bounded three ways: at most
 * `maxConcurrent` at once (more is 503 with Retry-After, at once: nothing queues behind a job that
 * may take seconds), at most `timeoutMs` each (then the worker is terminated: 504), and a fit
 * whose client went away is terminated too. Each fit gets a fresh worker: terminating it is the
 * only way to stop a computation, and fits are rare (the board is cached until the store changes).
 */
import type { ServerResponse } from 'node:http';
import { Worker } from 'node:worker_threads';
import { ClientAbort, GatewayError } from '../../runtime/index.ts';
import type { FitJob, FitReply } from './fit-worker.ts';

const WORKER_ENTRY = new URL('./fit-worker.mjs', import.meta.url);

export interface FitLimits {
  maxConcurrent: number;
  timeoutMs: number;
  /** Old-generation heap of a worker, MiB: a fit that needs more fails alone. */
  memoryMb: number;
}

export type FitResult = Extract<FitReply, { ok: true }>;

export class FitRunner {
  private running = 0;

  constructor(private readonly limits: FitLimits) {}

  /** Fits in a worker; `res` is the client's response, watched for the client going away. */
  run(job: FitJob, res: ServerResponse): Promise<FitResult> {
    if (this.running >= this.limits.maxConcurrent) {
      return Promise.reject(
        new GatewayError(
          'overloaded',
          `Too many leaderboard fits running (at most ${this.limits.maxConcurrent}); retry shortly`,
          {
            headers: { 'Retry-After': '1' },
          },
        ),
      );
    }
    if (res.destroyed) return Promise.reject(clientGone());
    this.running++;
    const abort = ClientAbort.watch(res);
    const worker = new Worker(WORKER_ENTRY, {
      workerData: job,
      resourceLimits: { maxOldGenerationSizeMb: this.limits.memoryMb },
    });
    return new Promise<FitResult>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        abort.off('abort', onAbort);
        ClientAbort.unwatch(res);
        this.running--;
        fn();
      };
      const stop = (err: Error) =>
        settle(() => {
          void worker.terminate();
          reject(err);
        });
      const timer = setTimeout(
        () =>
          stop(
            new GatewayError(
              'unavailable',
              `Bradley–Terry fit exceeded its time limit (${this.limits.timeoutMs} ms); ask for fewer bootstrap samples`,
              { status: 504 },
            ),
          ),
        this.limits.timeoutMs,
      );
      const onAbort = () => stop(clientGone());
      abort.once('abort', onAbort);
      worker.once('message', (reply: FitReply) =>
        settle(() => (reply.ok ? resolve(reply) : reject(new Error(`Bradley–Terry fit failed: ${reply.error}`)))),
      );
      worker.once('error', (err: Error & { code?: string }) =>
        settle(() =>
          reject(
            err.code === 'ERR_WORKER_OUT_OF_MEMORY'
              ? new GatewayError('unavailable', `Bradley–Terry fit needs more than ${this.limits.memoryMb} MiB`, {
                  status: 503,
                })
              : err,
          ),
        ),
      );
      worker.once('exit', (code) => settle(() => reject(new Error(`Bradley–Terry fit worker exited (code ${code})`))));
    });
  }
}

/** 499: the client closed the request (nginx's code); nobody reads this answer, the log does. */
function clientGone(): GatewayError {
  return new GatewayError('bad_request', 'Client closed the request', { status: 499 });
}
