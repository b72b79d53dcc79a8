/**
 * What the benchmark runners print and keep: medians, number formatting, PASS/MISS tags, aligned
 * tables and the results file. Shared so that every bench reads its figures the same way.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Median (steadier than the mean on a shared machine); undefined for no values. */
export function mid(values: Array<number | undefined>): number | undefined {
  const v = values.filter((x): x is number => x !== undefined && !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const h = Math.floor(v.length / 2);
  return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

export const fmt = (n: number | undefined, digits = 1) =>
  n === undefined || Number.isNaN(n) ? '-' : n.toFixed(digits);
export const signed = (n: number | undefined, digits = 2) => (n !== undefined && n >= 0 ? '+' : '') + fmt(n, digits);
/** ' PASS' / ' MISS' after a figure judged against a target; nothing where no target applies. */
export const verdict = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? ' PASS' : ' MISS');

/**
 * First column left-aligned, the others right-aligned, two spaces apart. Without `widths` each
 * column is as wide as its widest cell; nothing is printed for no rows.
 */
export function printTable(head: string[], rows: string[][], widths?: number[]): void {
  if (rows.length === 0) return;
  const w = widths ?? head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ');
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}

/** The machine a run was measured on, for the results file. */
export const machine = (pinned: boolean) => ({
  cpus: cpus().length,
  model: cpus()[0]?.model,
  loadavg: loadavg(),
  node: process.version,
  pinned,
});

/** Writes the run's figures as JSON (formatted the way biome lints bench/**) and says where. */
export function writeResults(file: string, data: unknown): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
  // biome.json lints bench/**: format the file its way so that `npm run lint` stays clean (best effort).
  spawnSync(join(root, 'node_modules', '.bin', 'biome'), ['format', '--write', file], { cwd: root, stdio: 'ignore' });
  console.log(`\nresults: ${file}`);
}

/** The commit measured: short hash, `-dirty` when tracked files differ from it. */
export function gitCommit(): string {
  try {
    const hash = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: root,
      encoding: 'utf8',
    });
    return dirty.trim() ? `${hash}-dirty` : hash;
  } catch {
    return 'unknown';
  }
}
