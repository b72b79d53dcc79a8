import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { markdownTable } from '../../bench/common/markdown-table.ts';
import { formatRatio, historyMarkdown, judge, type RoundFigures, ratio } from '../../bench/common/ratios.ts';

const row = (target: string, round: number, cpuUsPerReq: number, p99Ms = 2, p50Ms = 1, rps = 1000): RoundFigures => ({
  target,
  round,
  cpuUsPerReq,
  p50Ms,
  p99Ms,
  rps,
});

describe('bench ratios', () => {
  it('pairs subject and baseline round by round and takes the median of the per-round ratios', () => {
    // Round 2's machine was slower for both: its ratio is what counts, not the ratio of the medians.
    const rows = [
      row('s', 1, 200),
      row('b', 1, 100),
      row('s', 2, 600),
      row('b', 2, 400),
      row('s', 3, 330),
      row('b', 3, 100),
    ];
    const r = ratio(rows, 's', 'b')!;
    expect(r.rounds).toBe(3);
    expect(r.cpu.median).toBeCloseTo(2);
    expect(r.cpu.min).toBeCloseTo(1.5);
    expect(r.cpu.max).toBeCloseTo(3.3);
    expect(r.p99.median).toBe(1);
  });

  it('leaves out a round where either side is missing or has no usable figure', () => {
    const rows = [row('s', 1, 300), row('b', 1, 100), row('s', 2, 500), row('s', 3, Number.NaN), row('b', 3, 100)];
    expect(ratio(rows, 's', 'b')!.rounds).toBe(1);
    expect(ratio([row('s', 1, 300)], 's', 'b')).toBeUndefined();
    expect(ratio([row('s', 1, 300), row('b', 1, 0)], 's', 'b')).toBeUndefined();
  });

  it('formats a ratio with its range only when the rounds disagree', () => {
    expect(formatRatio({ median: 1.234, min: 1.1, max: 1.4 })).toBe('1.23× (1.10–1.40)');
    expect(formatRatio({ median: 1.232, min: 1.231, max: 1.234 })).toBe('1.23×');
    expect(formatRatio({ median: 1.234, min: 1.1, max: 1.4 }, false)).toBe('1.23×');
    expect(formatRatio(undefined)).toBe('-');
  });

  it('judges against the ceilings that apply', () => {
    const r = ratio([row('s', 1, 130, 3), row('b', 1, 100, 2)], 's', 'b')!;
    expect(judge(r, { cpu: 1.2, p99: 1.5 })).toEqual({ cpu: false, p99: true });
    expect(judge(r, { cpu: 2 })).toEqual({ cpu: true, p99: undefined });
  });

  /** A history entry with a long label, a wide figure and a ratio that could not be measured. */
  const entry = historyMarkdown(
    {
      date: '2026-11-29T15:04:05.000Z',
      commit: 'abc1234',
      floor: 'Koa + undici',
      connections: 32,
      rounds: 3,
      rows: [
        { target: 'floor', cpuUsPerReq: 100, p50Ms: 1, p99Ms: 2, rps: 1000 },
        { target: 'svc', cpuUsPerReq: 250, p50Ms: 2, p99Ms: 5, rps: 400 },
        { target: 'slow', cpuUsPerReq: 1057.3, p50Ms: 1, p99Ms: 2, rps: 1000 },
      ],
      ratios: [
        { subject: 'svc', cpu: 2.5, p50: 2, p99: 2.5 },
        { subject: 'slow', cpu: 10.07, p50: 4.42, p99: 3.33 },
        { subject: 'unmeasured', cpu: Number.NaN, p50: 1, p99: 1 },
      ],
    },
    { svc: 'the service', slow: 'typed proxy, POST /mcp typed send' },
  );

  it('writes a history entry as a markdown table of ratios to the floor', () => {
    expect(entry).toContain('### 2026-11-29 15:04 UTC, abc1234');
    expect(entry).toContain('3 round(s), 32 connections; ratios to the Koa + undici floor measured in the same round');
    expect(entry).toContain('| the service                       |      250.0 |     2.50× |     2.00× |     2.50× |');
    expect(entry).toContain('| unmeasured                        |          - |         - |     1.00× |     1.00× |');
  });

  // CI's lint step (`biome ci`) checks bench/history/README.md: a table a benchmark appends must
  // come out as Biome lays it out, or the next CI run fails on the committed history.
  it('appends history that Biome leaves as it is', () => {
    const instructions = markdownTable(
      ['target', 'k instructions/request', 'ratio'],
      ['left', 'right', 'right'],
      [
        ['floor: Koa + undici, buffers (jsonrpc)', '519', '-'],
        ['µ', '1,529', '2.95×'],
      ],
    ).join('\n');
    const readme = `# History\n\nSome text.\n\n${entry}\n${instructions}\n`;
    expect(biomeFormatted(readme, 'README.md')).toBe(readme);
  });
});

/** What `biome format` makes of `text` as a file named `name` (the project's own Biome and settings). */
function biomeFormatted(text: string, name: string): string {
  const biome = join(import.meta.dirname, '../../node_modules/.bin/biome');
  return execFileSync(biome, ['format', `--stdin-file-path=${name}`], { input: text, encoding: 'utf8' });
}
