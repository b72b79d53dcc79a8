/**
 * One measurement of one target by the pinned load generator, as a row of figures (throughput,
 * latency, CPU per request of the target and of its upstream, noise indicators), and the median
 * row of a target over the rounds. Shared by `npm run bench` (bench/services) and
 * bench/typed-proxy/run.ts.
 */
import type { Started } from '../typed-proxy/children.ts';
import type { LoadJob } from '../typed-proxy/loadgen.ts';
import { cpuUsPerRequest, runLoad } from './harness.ts';
import { mid } from './report.ts';

/** What the load generator sends to a target and which processes it charges. */
export interface Target<K extends string = string> {
  key: K;
  url: string;
  /** The process whose CPU per request is reported. */
  proc: Started;
  /** The process behind it (upstream, backend), whose CPU per request is reported beside. */
  upstream?: Started;
  method?: 'GET' | 'POST';
  body?: string;
  headers: Record<string, string>;
  /** An answer without this header counts as an error (the pipeline's proof of work). */
  expectHeader?: string;
}

export interface Row<K extends string = string> {
  target: K;
  connections: number;
  round: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** Target process CPU (all threads) per completed request, µs (scheduler run time where available). */
  cpuUsPerReq: number;
  /** The same from utime + stime clock ticks (the figure before schedstat; kept to compare). */
  cpuTickUsPerReq?: number;
  /** The upstream's CPU per request in the same window (proxied targets only), µs. */
  upstreamUsPerReq?: number;
  loadgenCpu: number;
  /** Share of the target core busy in the window, and the share of it not used by the measured processes. */
  coreBusy?: number;
  coreOthers?: number;
  requests: number;
  errors: number;
  firstError?: string;
  /** The measured window (process.hrtime ns), to pick a profile's samples. */
  windowNs: [string, string];
}

export interface Placement {
  /** taskset core list of the load generator; undefined: unpinned. */
  loadCpu?: string;
  /** The core the targets run on (a single number), to tell how busy it was. */
  targetCore?: number;
  clockTicks: number;
}

export async function measure<K extends string>(
  t: Target<K>,
  o: { connections: number; round: number; warmupMs: number; durationMs: number } & Placement,
): Promise<Row<K>> {
  const job: LoadJob = {
    url: t.url,
    connections: o.connections,
    warmupMs: o.warmupMs,
    durationMs: o.durationMs,
    method: t.method,
    body: t.body,
    headers: t.headers,
    expectHeader: t.expectHeader,
    pids: t.upstream ? [t.proc.pid, t.upstream.pid] : [t.proc.pid],
    targetCore: o.targetCore,
  };
  const r = await runLoad(job, o.loadCpu);
  const perReq = (pid: number) => cpuUsPerRequest(r, pid, o.clockTicks);
  return {
    target: t.key,
    connections: o.connections,
    round: o.round,
    rps: r.rps,
    p50Ms: r.latencyMs.p50,
    p99Ms: r.latencyMs.p99,
    meanMs: r.latencyMs.mean,
    cpuUsPerReq: perReq(t.proc.pid),
    cpuTickUsPerReq: r.requests ? ((r.cpuTicks[t.proc.pid] / o.clockTicks) * 1e6) / r.requests : Number.NaN,
    upstreamUsPerReq: t.upstream ? perReq(t.upstream.pid) : undefined,
    loadgenCpu: r.loadgenCpu,
    coreBusy: r.targetCoreBusy,
    coreOthers: r.targetCoreOthers,
    requests: r.requests,
    errors: r.errors,
    firstError: r.firstError,
    windowNs: r.windowNs,
  };
}

/** One row per target and concurrency: the median of each figure over the rounds, requests and errors summed. */
export function medianRow<K extends string>(rows: Row<K>[]): Row<K> {
  const m = (f: (r: Row<K>) => number | undefined) => mid(rows.map(f));
  return {
    ...rows[0],
    rps: m((r) => r.rps)!,
    p50Ms: m((r) => r.p50Ms)!,
    p99Ms: m((r) => r.p99Ms)!,
    meanMs: m((r) => r.meanMs)!,
    cpuUsPerReq: m((r) => r.cpuUsPerReq)!,
    cpuTickUsPerReq: m((r) => r.cpuTickUsPerReq),
    upstreamUsPerReq: m((r) => r.upstreamUsPerReq),
    loadgenCpu: m((r) => r.loadgenCpu)!,
    coreBusy: m((r) => r.coreBusy),
    coreOthers: m((r) => r.coreOthers),
    requests: rows.reduce((s, r) => s + r.requests, 0),
    errors: rows.reduce((s, r) => s + r.errors, 0),
    firstError: rows.find((r) => r.firstError)?.firstError,
  };
}

/** Interleaved order: every other round reversed, so that drift in the machine's load hits every target alike. */
export const roundOrder = <T>(list: T[], round: number): T[] => (round % 2 ? list : [...list].reverse());
