/**
 * A Markdown table laid out the way Biome formats one: `biome ci` (CI's lint step) checks the
 * Markdown files too, so a table a benchmark appends to bench/history/README.md must come out
 * already formatted. Each column is as wide as its widest cell (at least 3); a right-aligned
 * column's cells are padded on the left and its separator ends in `:`.
 */
export type Align = 'left' | 'right';

export function markdownTable(header: string[], align: Align[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(3, h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const cell = (text: string, i: number) =>
    align[i] === 'right' ? text.padStart(widths[i] as number) : text.padEnd(widths[i] as number);
  const line = (cells: string[]) => `| ${cells.map(cell).join(' | ')} |`;
  const separator = widths.map((w, i) => (align[i] === 'right' ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w)));
  return [line(header), `| ${separator.join(' | ')} |`, ...rows.map(line)];
}
