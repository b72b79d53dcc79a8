/** Cuts `text` at the given positions (any, in any order; taken modulo its length + 1): its chunks, none empty. */
export function cut(text: string, at: number[]): string[] {
  const points = [...new Set(at.map((p) => p % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let last = 0;
  for (const p of points) {
    out.push(text.slice(last, p));
    last = p;
  }
  out.push(text.slice(last));
  return out.filter((c) => c !== '');
}
