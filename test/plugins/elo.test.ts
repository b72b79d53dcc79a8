/**
 * Elo math and Bradley–Terry maximum likelihood with bootstrap intervals, against cases small
 * enough to compute by hand.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { getPriority } from 'node:os';
import { describe, expect, it } from 'vitest';
import { bradleyTerry } from '../../plugins/elo/bradley-terry.ts';
import { eloUpdate, expectedScore } from '../../plugins/elo/elo.ts';
import { FitRunner } from '../../plugins/elo/fit-runner.ts';
import { seededRandom } from '../../plugins/elo/random.ts';

describe('Elo', () => {
  it('gives even odds to equal ratings and 10:1 to a 400-point lead', () => {
    expect(expectedScore(1500, 1500)).toBe(0.5);
    expect(expectedScore(1900, 1500)).toBeCloseTo(10 / 11, 12);
    expect(expectedScore(1500, 1900)).toBeCloseTo(1 / 11, 12);
  });

  it('moves equal ratings by K/2 and keeps the sum', () => {
    expect(eloUpdate(1500, 1500, 1)).toEqual([1516, 1484]);
    expect(eloUpdate(1500, 1500, 0, 20)).toEqual([1490, 1510]);
    const [a, b] = eloUpdate(1613.7, 1421.2, 0);
    expect(a + b).toBeCloseTo(1613.7 + 1421.2, 9);
  });

  it('rewards an upset more than an expected win', () => {
    const expected = 32 * (1 - 10 / 11);
    const [fav] = eloUpdate(1900, 1500, 1);
    expect(fav - 1900).toBeCloseTo(expected, 9);
    const [under] = eloUpdate(1500, 1900, 1);
    expect(under - 1500).toBeCloseTo(32 * (10 / 11), 9);
  });
});

describe('Bradley–Terry', () => {
  it('fits two players exactly: 2 wins to 1 is odds 2, 400·log10(2) points apart', () => {
    // A (0) beats B (1) twice, B beats A once.
    const { ratings } = bradleyTerry(2, [0, 0, 1], [1, 1, 0], { prior: 0 });
    expect(ratings[0]! - ratings[1]!).toBeCloseTo(400 * Math.log10(2), 6);
    expect((ratings[0]! + ratings[1]!) / 2).toBeCloseTo(1500, 9);
  });

  it('satisfies the likelihood equations on three players', () => {
    // wins: 0>1 ×3, 1>0 ×1, 1>2 ×2, 2>1 ×2, 0>2 ×1, 2>0 ×2
    const games: Array<[number, number, number]> = [
      [0, 1, 3],
      [1, 0, 1],
      [1, 2, 2],
      [2, 1, 2],
      [0, 2, 1],
      [2, 0, 2],
    ];
    const w: number[] = [];
    const l: number[] = [];
    for (const [a, b, n] of games) {
      for (let k = 0; k < n; k++) {
        w.push(a);
        l.push(b);
      }
    }
    const { ratings } = bradleyTerry(3, w, l, { prior: 0 });
    const p = Array.from(ratings, (r) => 10 ** (r / 400));
    // At the MLE each player's wins equal its expected wins: W_i = Σ_j n_ij p_i / (p_i + p_j).
    const n = [
      [0, 4, 3],
      [4, 0, 4],
      [3, 4, 0],
    ];
    const wins = [4, 3, 4];
    for (let i = 0; i < 3; i++) {
      let expectedWins = 0;
      for (let j = 0; j < 3; j++) if (j !== i) expectedWins += (n[i]![j]! * p[i]!) / (p[i]! + p[j]!);
      expect(expectedWins).toBeCloseTo(wins[i]!, 8);
    }
  });

  it('keeps ratings finite with a prior when a player never lost', () => {
    const { ratings } = bradleyTerry(2, [0, 0, 0], [1, 1, 1], { prior: 1 });
    // Plain MLE would send the winner to +∞; one virtual win and loss each against a reference
    // of strength 1 keeps both finite, the winner ahead.
    expect(Number.isFinite(ratings[0]!) && Number.isFinite(ratings[1]!)).toBe(true);
    expect(ratings[0]!).toBeGreaterThan(ratings[1]!);
  });

  it('leaves a player without games at the mean strength of the prior', () => {
    const { ratings } = bradleyTerry(3, [0], [1], { prior: 1 });
    expect(ratings[2]!).toBeGreaterThan(ratings[1]!);
    expect(ratings[2]!).toBeLessThan(ratings[0]!);
  });

  it('bootstraps reproducible intervals that contain the estimate and shrink with more data', () => {
    const rand = seededRandom(7);
    const make = (games: number) => {
      const w: number[] = [];
      const l: number[] = [];
      // True strengths 4 : 2 : 1.
      const p = [4, 2, 1];
      for (let g = 0; g < games; g++) {
        const a = g % 3;
        const b = (g + 1 + (g % 2)) % 3;
        if (a === b) continue;
        const aWins = rand() < p[a]! / (p[a]! + p[b]!);
        w.push(aWins ? a : b);
        l.push(aWins ? b : a);
      }
      return { w, l };
    };
    const small = make(60);
    const big = make(2000);
    const one = bradleyTerry(3, small.w, small.l, { prior: 1 }, { samples: 100, seed: 42 });
    const again = bradleyTerry(3, small.w, small.l, { prior: 1 }, { samples: 100, seed: 42 });
    expect(Array.from(one.lower!)).toEqual(Array.from(again.lower!));
    expect(Array.from(one.upper!)).toEqual(Array.from(again.upper!));
    const other = bradleyTerry(3, small.w, small.l, { prior: 1 }, { samples: 100, seed: 43 });
    expect(Array.from(other.lower!)).not.toEqual(Array.from(one.lower!));
    const wide = bradleyTerry(3, big.w, big.l, { prior: 1 }, { samples: 100, seed: 42 });
    for (let k = 0; k < 3; k++) {
      expect(one.lower![k]!).toBeLessThanOrEqual(one.ratings[k]!);
      expect(one.upper![k]!).toBeGreaterThanOrEqual(one.ratings[k]!);
      expect(wide.upper![k]! - wide.lower![k]!).toBeLessThan(one.upper![k]! - one.lower![k]!);
    }
    // The true order is recovered with enough games, and the true gaps lie in the intervals.
    expect(wide.ratings[0]!).toBeGreaterThan(wide.ratings[1]!);
    expect(wide.ratings[1]!).toBeGreaterThan(wide.ratings[2]!);
    const gap = 400 * Math.log10(2);
    expect(wide.ratings[0]! - wide.ratings[1]!).toBeGreaterThan(gap - 60);
    expect(wide.ratings[0]! - wide.ratings[1]!).toBeLessThan(gap + 60);
  });
});

describe('Bradley–Terry fit worker priority (bradley_terry.nice)', () => {
  /** Niceness of each thread of this process (Linux: /proc/self/task/<tid>/stat, field 19). */
  const niceness = () =>
    readdirSync('/proc/self/task').flatMap((tid) => {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        return [Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
      } catch {
        return []; // the thread ended meanwhile
      }
    });
  const fitOnce = async (nice: number) => {
    const runner = new FitRunner({ maxConcurrent: 1, timeoutMs: 60_000, memoryMb: 64, nice });
    try {
      const res = new ServerResponse(new IncomingMessage(new Socket()));
      const job = {
        n: 2,
        winners: Int32Array.from([0, 0]),
        losers: Int32Array.from([1, 1]),
        options: {},
        bootstrap: { samples: 0 },
      };
      await runner.run(job, res);
      // The worker waits for the next fit: its thread is still there to look at.
      return niceness();
    } finally {
      await runner.close();
    }
  };

  it.runIf(process.platform === 'linux')('runs at the process priority by default, lowered when asked', async () => {
    const own = getPriority();
    expect((await fitOnce(0)).every((n) => n === own)).toBe(true);
    if (own < 7) expect((await fitOnce(7)).filter((n) => n === 7)).toHaveLength(1);
  });
});
