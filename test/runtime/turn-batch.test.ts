/**
 * TurnBatch: what requests queue in one turn of the event loop runs together at its end; each
 * caller gets its own output or failure.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { TurnBatch } from '../../runtime/index.ts';

describe('TurnBatch', () => {
  it('runs what one turn queued as one batch, in order; the next turn gets a batch of its own', async () => {
    const runs: number[][] = [];
    const batch = new TurnBatch<number, number>((inputs) => {
      runs.push([...inputs]);
      return inputs.map((n) => n * 10);
    });
    const first = [batch.add(1), batch.add(2), batch.add(3)];
    expect(runs).toEqual([]); // nothing runs before the turn ends
    expect(await Promise.all(first)).toEqual([10, 20, 30]);
    await nextTurn();
    expect(await batch.add(4)).toBe(40);
    expect(runs).toEqual([[1, 2, 3], [4]]);
  });

  it('fail(i) rejects only that caller; a throw rejects the whole batch', async () => {
    const batch = new TurnBatch<string, string>((inputs, fail) =>
      inputs.map((s, i) => {
        if (s === 'throw') throw new Error('run broke');
        if (s === 'bad') fail(i, new Error(`bad input ${i}`));
        return s.toUpperCase();
      }),
    );
    const outcomes = await Promise.allSettled([batch.add('a'), batch.add('bad'), batch.add('c')]);
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message))).toEqual([
      'A',
      'bad input 1',
      'C',
    ]);
    await nextTurn();
    const all = await Promise.allSettled([batch.add('x'), batch.add('throw')]);
    expect(all.map((o) => o.status === 'rejected' && (o.reason as Error).message)).toEqual(['run broke', 'run broke']);
    // The batch is usable after a failed run.
    expect(await batch.add('y')).toBe('Y');
  });
});
