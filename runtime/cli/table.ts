/**
 * Plain-text rendering for the command line: aligned tables, key/value blocks, human sizes and
 * durations. No colours, so the output reads the same in a terminal, a pipe or a log.
 */

export interface Column {
  title: string;
  /** `right` for numbers. Default `left`. */
  align?: 'left' | 'right';
}

/** Columns separated by two spaces, padded to the widest cell; the last column is not padded when left-aligned. */
export function renderTable(columns: Column[], rows: string[][]): string {
  const widths = columns.map((c, i) => Math.max(c.title.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    columns
      .map((c, i) => {
        const cell = cells[i] ?? '';
        const width = widths[i] ?? 0;
        if (c.align === 'right') return cell.padStart(width);
        return i === columns.length - 1 ? cell : cell.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.title)), ...rows.map(line)].join('\n');
}

/** `key   value` lines, keys padded to the longest. */
export function renderPairs(pairs: Array<[string, string]>): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** 1536 → `1.5 KiB`, 12897485 → `12.3 MiB`; null → `-`. */
export function humanBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '-';
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** A latency in milliseconds: `2.50 ms`; null → `-`. */
export function ms(value: number | null | undefined): string {
  return value === null || value === undefined ? '-' : `${value.toFixed(2)} ms`;
}

/** A span of time: `850 ms`, `12.3 s`, `5m 03s`, `2h 05m 09s`, `3d 04h 05m`. */
export function humanDuration(milliseconds: number): string {
  if (milliseconds < 1000) return `${Math.round(milliseconds)} ms`;
  if (milliseconds < 60_000) return `${(milliseconds / 1000).toFixed(1)} s`;
  const total = Math.floor(milliseconds / 1000);
  const d = Math.floor(total / 86400);
  const h = Math.floor((total % 86400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const two = (n: number) => String(n).padStart(2, '0');
  if (d > 0) return `${d}d ${two(h)}h ${two(m)}m`;
  if (h > 0) return `${h}h ${two(m)}m ${two(s)}s`;
  return `${m}m ${two(s)}s`;
}

/** Whole seconds (an uptime): `42 s`, then as humanDuration (`5m 03s`, `2h 05m 09s`…). */
export function humanSeconds(seconds: number): string {
  return seconds < 60 ? `${Math.floor(seconds)} s` : humanDuration(seconds * 1000);
}

/** 0.953 → `95.3%`; null → `-`. */
export function percent(ratio: number | null | undefined): string {
  return ratio === null || ratio === undefined ? '-' : `${(ratio * 100).toFixed(1)}%`;
}

/** A count or `-`. */
export function count(value: number | null | undefined): string {
  return value === null || value === undefined ? '-' : String(value);
}
