/**
 * Closed-loop load generator, run as its own process (pinned to its own core by run.ts): N
 * keep-alive connections, each sending the next request as soon as the previous answer has been
 * read. After a warm-up it measures for a fixed window; the CPU counters of the target processes
 * are read at the window's two edges, so CPU per request and throughput cover the same requests.
 *
 * Input: one JSON argument (LoadJob). Output: one JSON line on stdout (LoadResult).
 */
import { Client } from 'undici';
import { LatencyHistogram } from './histogram.ts';
import { readCoreTicks, readCpuNs, readCpuTicks } from './proc.ts';

export interface LoadJob {
  url: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** POST (the default, with `body`) or GET (no body). */
  method?: 'GET' | 'POST';
  body?: string;
  headers: Record<string, string>;
  /** A response lacking this header counts as an error (the strict pipeline's proof of work). */
  expectHeader?: string;
  /** Record the time to the first body chunk (streamed answers) instead of to the end of the answer. */
  firstByte?: boolean;
  /** Processes whose CPU time is read at the edges of the measured window. */
  pids: number[];
  /** The core the targets run on, to tell how busy it was (other processes included). */
  targetCore?: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  statuses: Record<string, number>;
  elapsedMs: number;
  rps: number;
  latencyMs: { mean: number; p50: number; p90: number; p99: number; p999: number; max: number };
  /** Clock ticks (utime + stime) each pid spent in the window, keyed by pid. */
  cpuTicks: Record<string, number>;
  /** The same from the scheduler's run time (ns), exact; missing where schedstat is not available. */
  cpuNs?: Record<string, number>;
  /** Fraction of one core the generator itself used; near 1 means it, not the target, was the limit. */
  loadgenCpu: number;
  /** The measured window as process.hrtime.bigint() values (CLOCK_MONOTONIC ns, comparable across processes). */
  windowNs: [string, string];
  /** Fraction of the target core that was busy in the window (all processes, interrupts included). */
  targetCoreBusy?: number;
  /** Fraction of the target core used by processes other than `pids` (and by interrupts): noise. */
  targetCoreOthers?: number;
  firstError?: string;
}

async function run(job: LoadJob): Promise<LoadResult> {
  const url = new URL(job.url);
  const path = url.pathname + url.search;
  const expect = job.expectHeader?.toLowerCase();
  const method = job.method ?? 'POST';
  const clients = Array.from(
    { length: job.connections },
    () => new Client(url.origin, { pipelining: 1, keepAliveTimeout: 120_000, connect: { noDelay: true } }),
  );
  const histogram = new LatencyHistogram();
  const statuses: Record<string, number> = {};
  type Phase = 'warmup' | 'measure' | 'stop';
  let phase: Phase = 'warmup';
  // Read through a function: the phase changes under the loops' feet (timers), not in them.
  const now = (): Phase => phase;
  let requests = 0;
  let errors = 0;
  let firstError: string | undefined;

  const fail = (why: string) => {
    errors++;
    firstError ??= why;
  };

  async function loop(client: Client): Promise<void> {
    while (now() !== 'stop') {
      const start = process.hrtime.bigint();
      let status = 0;
      let ok = false;
      let firstByteAt: bigint | undefined;
      try {
        const res = await client.request({ method, path, headers: job.headers, body: job.body });
        if (job.firstByte) {
          for await (const _ of res.body) firstByteAt ??= process.hrtime.bigint();
        } else await res.body.dump();
        status = res.statusCode;
        ok = status >= 200 && status < 300 && (!expect || res.headers[expect] !== undefined);
        if (!ok && now() === 'measure') fail(`status ${status}${expect ? `, ${expect}: ${res.headers[expect]}` : ''}`);
      } catch (err) {
        if (now() === 'measure') fail(String((err as Error).message ?? err));
        if (now() !== 'stop') await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      if (now() !== 'measure') continue;
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (!ok) continue;
      requests++;
      histogram.record(Number((firstByteAt ?? process.hrtime.bigint()) - start) / 1000);
    }
  }

  const loops = clients.map(loop);
  await new Promise((r) => setTimeout(r, job.warmupMs));
  const cpuBefore = job.pids.map(readCpuTicks);
  const nsBefore = job.pids.map(readCpuNs);
  const coreBefore = job.targetCore === undefined ? undefined : readCoreTicks(job.targetCore);
  const ownBefore = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  phase = 'measure';
  await new Promise((r) => setTimeout(r, job.durationMs));
  phase = 'stop';
  const t1 = process.hrtime.bigint();
  const elapsedMs = Number(t1 - t0) / 1e6;
  const cpuAfter = job.pids.map(readCpuTicks);
  const nsAfter = job.pids.map(readCpuNs);
  const coreAfter = job.targetCore === undefined ? undefined : readCoreTicks(job.targetCore);
  const own = process.cpuUsage(ownBefore);
  await Promise.allSettled(loops);
  await Promise.allSettled(clients.map((c) => c.destroy()));

  const cpuTicks: Record<string, number> = {};
  let cpuNs: Record<string, number> | undefined = {};
  job.pids.forEach((pid, i) => {
    cpuTicks[pid] = cpuAfter[i] - cpuBefore[i];
    const [a, b] = [nsBefore[i], nsAfter[i]];
    if (a === undefined || b === undefined) cpuNs = undefined;
    else if (cpuNs) cpuNs[pid] = b - a;
  });
  let targetCoreBusy: number | undefined;
  let targetCoreOthers: number | undefined;
  if (coreBefore && coreAfter && coreAfter.total > coreBefore.total) {
    const total = coreAfter.total - coreBefore.total;
    const busy = coreAfter.busy - coreBefore.busy;
    const ours = Object.values(cpuTicks).reduce((s, t) => s + t, 0);
    targetCoreBusy = busy / total;
    targetCoreOthers = Math.max(0, busy - ours) / total;
  }
  return {
    requests,
    errors,
    statuses,
    elapsedMs,
    rps: (requests * 1000) / elapsedMs,
    latencyMs: {
      mean: histogram.mean() / 1000,
      p50: histogram.percentile(50) / 1000,
      p90: histogram.percentile(90) / 1000,
      p99: histogram.percentile(99) / 1000,
      p999: histogram.percentile(99.9) / 1000,
      max: histogram.max / 1000,
    },
    cpuTicks,
    cpuNs,
    loadgenCpu: (own.user + own.system) / 1000 / elapsedMs,
    windowNs: [String(t0), String(t1)],
    targetCoreBusy,
    targetCoreOthers,
    firstError,
  };
}

const job = JSON.parse(process.argv[2] ?? '{}') as LoadJob;
run(job).then(
  (result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exit(0);
  },
  (err) => {
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
