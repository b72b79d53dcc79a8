/**
 * Ratios of a subject to a baseline measured in the same round (back to back, so under the same
 * machine load), summarised as the median of the per-round ratios with their spread, and the
 * history line a run appends. Pure functions: tested in test/bench/ratios.test.ts.
 */

import { markdownTable } from './markdown-table.ts';
import { mid } from './report.ts';

/** The figures of one target in one round that the ratios read. */
export interface RoundFigures {
  target: string;
  round: number;
  cpuUsPerReq: number;
  p50Ms: number;
  p99Ms: number;
  rps: number;
}

/** A ratio over the rounds: the median of the per-round ratios, their least and greatest. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface Ratio {
  subject: string;
  baseline: string;
  rounds: number;
  cpu: Spread;
  p50: Spread;
  p99: Spread;
  rps: Spread;
}

const finite = (n: number) => Number.isFinite(n) && n > 0;

function spread(values: number[]): Spread | undefined {
  const v = values.filter((x) => Number.isFinite(x));
  if (v.length === 0) return undefined;
  return { median: mid(v)!, min: Math.min(...v), max: Math.max(...v) };
}

/**
 * subject ÷ baseline for each figure, paired round by round (a round where either side is
 * missing, or has no usable figure, is left out); undefined when no round pairs up.
 */
export function ratio(rows: RoundFigures[], subject: string, baseline: string): Ratio | undefined {
  const per: Array<Record<'cpu' | 'p50' | 'p99' | 'rps', number>> = [];
  for (const s of rows) {
    if (s.target !== subject) continue;
    const b = rows.find((r) => r.target === baseline && r.round === s.round);
    if (!b || !finite(s.cpuUsPerReq) || !finite(b.cpuUsPerReq)) continue;
    per.push({
      cpu: s.cpuUsPerReq / b.cpuUsPerReq,
      p50: finite(b.p50Ms) ? s.p50Ms / b.p50Ms : Number.NaN,
      p99: finite(b.p99Ms) ? s.p99Ms / b.p99Ms : Number.NaN,
      rps: finite(b.rps) ? s.rps / b.rps : Number.NaN,
    });
  }
  const [cpu, p50, p99, rps] = (['cpu', 'p50', 'p99', 'rps'] as const).map((k) => spread(per.map((p) => p[k])));
  if (!cpu) return undefined;
  const none = { median: Number.NaN, min: Number.NaN, max: Number.NaN };
  return { subject, baseline, rounds: per.length, cpu, p50: p50 ?? none, p99: p99 ?? none, rps: rps ?? none };
}

/** `1.23×` or `1.23× (1.10–1.40)` when the rounds disagree by more than the last digit. */
export function formatRatio(s: Spread | undefined, withRange = true): string {
  if (!s || !Number.isFinite(s.median)) return '-';
  const x = (n: number) => n.toFixed(2);
  return withRange && x(s.min) !== x(s.max) ? `${x(s.median)}× (${x(s.min)}–${x(s.max)})` : `${x(s.median)}×`;
}

/** A ceiling a ratio is judged against: PASS at or under it, MISS above. */
export interface Goal {
  cpu?: number;
  p99?: number;
}

export function judge(r: Ratio, goal: Goal): { cpu?: boolean; p99?: boolean } {
  return {
    cpu: goal.cpu === undefined ? undefined : r.cpu.median <= goal.cpu,
    p99: goal.p99 === undefined || !Number.isFinite(r.p99.median) ? undefined : r.p99.median <= goal.p99,
  };
}

/** One run's summary as the history keeps it: per subject its figures and its ratio to the floor. */
export interface HistoryEntry {
  date: string;
  commit: string;
  /** The floor the ratios are to (each route's own, in front of its upstream), as a label. */
  floor: string;
  connections: number;
  rounds: number;
  rows: Array<{ target: string; cpuUsPerReq: number; p50Ms: number; p99Ms: number; rps: number }>;
  ratios: Array<{ subject: string; cpu: number; p50: number; p99: number }>;
}

/**
 * The lines a run appends to bench/history/README.md (after a blank line): a heading with the run,
 * then one table row per subject (CPU, p50 and p99 ratios to the floor, and the CPU µs per request
 * behind them), formatted as Biome formats Markdown.
 */
export function historyMarkdown(e: HistoryEntry, labels: Record<string, string> = {}): string {
  const cpuOf = (t: string) => e.rows.find((r) => r.target === t)?.cpuUsPerReq;
  const n = (v: number | undefined, d: number) => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(d));
  const times = (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '-');
  const lines = [
    `### ${e.date.slice(0, 16).replace('T', ' ')} UTC, ${e.commit}`,
    '',
    `${e.rounds} round(s), ${e.connections} connections; ratios to the ${e.floor} floor measured in the same round`,
    '',
    ...markdownTable(
      ['route', 'CPU µs/req', 'CPU ratio', 'p50 ratio', 'p99 ratio'],
      ['left', 'right', 'right', 'right', 'right'],
      e.ratios.map((r) => [
        labels[r.subject] ?? r.subject,
        n(cpuOf(r.subject), 1),
        times(r.cpu),
        times(r.p50),
        times(r.p99),
      ]),
    ),
  ];
  return `${lines.join('\n')}\n`;
}
