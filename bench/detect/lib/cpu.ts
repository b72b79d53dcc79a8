/**
 * CPU µs per call of `predict` (process.cpuUsage: user + system, so that time the process spends
 * preempted on a shared machine does not count), each item timed once on its first call (nothing
 * cached for it), p50 / mean / p99: the JIT is warmed first on `warm`, then `sets` (sets generated
 * with other seeds) are timed. Shared by the evaluation families (pii.ts, secrets.ts).
 */
export function cpuPerItem(
  predict: (text: string) => unknown,
  warm: ReadonlyArray<{ text: string }>,
  sets: ReadonlyArray<ReadonlyArray<{ text: string }>>,
): { p50: number; mean: number; p99: number } {
  for (let r = 0; r < 3; r++) for (const i of warm) predict(i.text);
  const times: number[] = [];
  for (const set of sets) {
    for (const i of set) {
      const start = process.cpuUsage();
      predict(i.text);
      const used = process.cpuUsage(start);
      times.push(used.user + used.system);
    }
  }
  times.sort((a, b) => a - b);
  return {
    p50: times[Math.floor(times.length / 2)] as number,
    mean: times.reduce((a, b) => a + b, 0) / times.length,
    p99: times[Math.floor(times.length * 0.99)] as number,
  };
}
