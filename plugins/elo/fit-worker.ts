/**
 * One Bradley–Terry fit (with its bootstrap) in a worker thread: a fit over every stored outcome
 * costs seconds with a bootstrap, which on the main thread would stall every other request.
 * Protocol: one `FitReply` per `FitJob` message, one job at a time; the worker then waits for
 * the next (fit-runner.ts terminates it to stop a fit).
 */
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { type BootstrapOptions, type BradleyTerryOptions, bradleyTerry } from './bradley-terry.ts';

// The lowest CPU priority for this thread only (Linux applies it per thread): on a busy machine
// the service's event loop gets a core before a fit does (a fit waits; requests should not).
try {
  setPriority(19);
} catch {
  // not permitted here: run at the normal priority
}

export interface FitJob {
  n: number;
  winners: Int32Array;
  losers: Int32Array;
  options: BradleyTerryOptions;
  bootstrap: BootstrapOptions;
}

export type FitReply =
  | { ok: true; ratings: Float64Array; lower?: Float64Array; upper?: Float64Array }
  | { ok: false; error: string };

parentPort?.on('message', (job: FitJob) => {
  let reply: FitReply;
  try {
    const fit = bradleyTerry(job.n, job.winners, job.losers, job.options, job.bootstrap);
    reply = { ok: true, ratings: fit.ratings, lower: fit.lower, upper: fit.upper };
  } catch (err) {
    reply = { ok: false, error: (err as Error).message };
  }
  const transfer = reply.ok
    ? [reply.ratings, reply.lower, reply.upper].flatMap((a) => (a ? [a.buffer as ArrayBuffer] : []))
    : [];
  parentPort?.postMessage(reply, transfer);
});
