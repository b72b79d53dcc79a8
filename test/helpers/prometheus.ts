/** The value of the first sample line starting with `prefix` in a Prometheus exposition, e.g. `x_total{status="ok"`. */
export function sample(text: string, prefix: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}
