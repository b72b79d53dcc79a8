/**
 * CPU time of a process from /proc/<pid>/stat: utime + stime (fields 14 and 15), in clock ticks,
 * summed over all its threads (JIT, GC and libuv workers included).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export function readCpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may contain spaces: split after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state), so utime (14) and stime (15) are at 11 and 12.
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * CPU time of a process in nanoseconds, summed over its threads' /proc/<pid>/task/<tid>/schedstat
 * (the scheduler's own run time, first field): exact where utime + stime are sampled at each
 * clock tick, a sampling that charges whole ticks to whoever runs when one falls and so drifts
 * when many processes take turns on a core. Undefined where schedstat is missing (no
 * CONFIG_SCHEDSTATS) or the process is gone. Threads that ended in between are not counted.
 */
export function readCpuNs(pid: number): number | undefined {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    return ns;
  } catch {
    return undefined;
  }
}

/** Clock ticks per second (`getconf CLK_TCK`), 100 on Linux when getconf is missing. */
export function clockTicks(): number {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
}

/** Busy and total clock ticks of one core from /proc/stat (busy = all but idle and iowait). */
export function readCoreTicks(cpu: number): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${cpu} `));
  if (!line) return { busy: 0, total: 0 };
  // user nice system idle iowait irq softirq steal guest guest_nice (guest time is already in user).
  const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = v.reduce((s, x) => s + x, 0);
  return { busy: total - v[3] - v[4], total };
}
