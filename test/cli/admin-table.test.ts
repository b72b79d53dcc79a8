import { describe, expect, it } from 'vitest';
import {
  humanBytes,
  humanDuration,
  humanSeconds,
  ms,
  percent,
  renderPairs,
  renderTable,
} from '../../runtime/cli/table.ts';

describe('admin output formatting', () => {
  it('human sizes in binary units', () => {
    expect(humanBytes(0)).toBe('0 B');
    expect(humanBytes(1023)).toBe('1023 B');
    expect(humanBytes(1536)).toBe('1.5 KiB');
    expect(humanBytes(12_897_485)).toBe('12.3 MiB');
    expect(humanBytes(53_687_091_200)).toBe('50.0 GiB');
    expect(humanBytes(null)).toBe('-');
  });

  it('durations', () => {
    expect(humanDuration(0)).toBe('0 ms');
    expect(humanDuration(999.6)).toBe('1000 ms');
    expect(humanDuration(12_345)).toBe('12.3 s');
    expect(humanDuration(303_000)).toBe('5m 03s');
    expect(humanDuration(7_509_000)).toBe('2h 05m 09s');
    expect(humanDuration(273_900_000)).toBe('3d 04h 05m');
    expect(humanSeconds(42.9)).toBe('42 s');
    expect(humanSeconds(3600)).toBe('1h 00m 00s');
    expect(ms(2.5)).toBe('2.50 ms');
    expect(ms(null)).toBe('-');
    expect(percent(0.953)).toBe('95.3%');
  });

  it('tables align text left and numbers right', () => {
    expect(
      renderTable(
        [{ title: 'NAME' }, { title: 'N', align: 'right' }, { title: 'NOTE' }],
        [
          ['a', '1', 'x'],
          ['longer', '1000', ''],
        ],
      ),
    ).toBe(['NAME       N  NOTE', 'a          1  x', 'longer  1000'].join('\n'));
    expect(
      renderPairs([
        ['a', '1'],
        ['longer', '2'],
      ]),
    ).toBe('a       1\nlonger  2');
  });
});
