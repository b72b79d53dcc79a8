/**
 * The process's own figures for GET /admin/status: memory and CPU. CPU `percent` is the share of
 * one core used over the last interval: since the previous status call when that was at least a
 * second ago (else the figure of that call is repeated), since the process started on the first
 * call. It can pass 100 when several threads work.
 */
const MIN_INTERVAL_MS = 1000;

let baseline = { at: performance.now(), usage: process.cpuUsage() };
let lastPercent: number | undefined;

export interface ProcessStats {
  memory: { rss_bytes: number; heap_used_bytes: number; heap_total_bytes: number };
  cpu: { user_seconds: number; system_seconds: number; percent: number };
}

export function processStats(): ProcessStats {
  const memory = process.memoryUsage();
  const usage = process.cpuUsage();
  const now = performance.now();
  const elapsedMs = now - baseline.at;
  if (lastPercent === undefined || elapsedMs >= MIN_INTERVAL_MS) {
    const usedMs = (usage.user - baseline.usage.user + usage.system - baseline.usage.system) / 1000;
    lastPercent = elapsedMs > 0 ? (usedMs / elapsedMs) * 100 : 0;
    baseline = { at: now, usage };
  }
  return {
    memory: { rss_bytes: memory.rss, heap_used_bytes: memory.heapUsed, heap_total_bytes: memory.heapTotal },
    cpu: {
      user_seconds: round(usage.user / 1e6, 3),
      system_seconds: round(usage.system / 1e6, 3),
      percent: round(lastPercent, 1),
    },
  };
}

function round(n: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(n * f) / f;
}
