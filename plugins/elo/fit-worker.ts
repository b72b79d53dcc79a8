/**
 * One Bradley–Terry fit (with its bootstrap) in a worker thread: a fit over every stored outcome
 * costs seconds with a bootstrap, which on the main thread would stall every other request.
 * Protocol: one `FitReply` per `FitJob` message, one job at a time; the worker then waits for
 * the next (fit-runner.ts terminates it to stop a fit).
 */
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { type BootstrapOptions, type BradleyTerryOptions, bradleyTerry } from './bradley-terry.ts';

export interface FitWorkerData {
  /** `bradley_terry.nice`: 0 keeps the process's priority. */
  nice: number;
}

// The process's CPU priority by default: lowered to 19, a fit on a machine whose cores were busy
// with other processes starved (a bootstrap of 1000: 30-44 s and past 120 s instead of 3-7 s),
// past its time limit (504). An operator who prefers the loop to win raises `nice`; Linux applies
// it to this thread only. Only ever lowered: raising a priority needs privileges.
const { nice } = workerData as FitWorkerData; // always given by fit-runner.ts
try {
  if (nice > getPriority()) setPriority(nice);
} catch {
  // not permitted here: run at the process's priority
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
