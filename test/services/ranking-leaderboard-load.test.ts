/**
 * A Bradley–Terry bootstrap cannot freeze the ranking service: with 3,000 comparisons, an
 * anonymous `?method=bradley-terry&bootstrap=100&seed=<new>` runs in a worker thread while a
 * second client is served meanwhile (its answers during the fit counted; its round trips against
 * its own baseline and the event loop delay p99, switchyard_event_loop_delay_seconds, printed, not
 * bounded: they move with the machine's load, issue 32). The fits are bounded: a
 * documented maximum of `bootstrap` (422 naming it), one fit at a time (503 with Retry-After),
 * a time limit (504), and a fit whose client went away is stopped (not answered, its slot free).
 *
 * No test waits on the fit's own time (issue 32): two busy loops on a 2-core machine slow a fit
 * many times over (at nice 19, a bootstrap of 1000, 6.7 s quiet, went past 120 s).
 * A bootstrap of 100 is fitted; the service's own time limit is out of reach, and a fit left
 * behind by a failed test is stopped (its client goes away) so that the next test is not refused.
 */
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { loopDelayBetween, readLoopDelay } from '../helpers/event-loop.ts';
import { sample } from '../helpers/prometheus.ts';
import { config, type Ranking, startRanking } from './ranking-helpers.ts';

const ENTITIES = 40;
const COMPARISONS = 3000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits for `check` to hold, looking every 50 ms (bounded by the test's own timeout). */
async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await sleep(50);
}

describe('ranking leaderboard: Bradley–Terry bootstrap off the event loop', () => {
  let r: Ranking;
  const ids: number[] = [];
  beforeAll(async () => {
    r = await startRanking('sqlite', { RANK_DB_SYNC: 'normal', RANK_BT_TIMEOUT_MS: '3600000' });
    for (let i = 0; i < ENTITIES; i++) {
      ids.push((await r.json<{ id: number }>('POST', '/entities/', { name: `entity ${i}` })).id);
    }
    // Entity i wins against j with probability rising with i − j: a board worth fitting.
    let next = 0;
    const worker = async () => {
      while (next < COMPARISONS) {
        next++;
        const a = randomInt(ENTITIES);
        const b = (a + 1 + randomInt(ENTITIES - 1)) % ENTITIES;
        const aWins = Math.random() < 0.5 + (a - b) / (2 * ENTITIES);
        await r.json('POST', '/comparisons/', {
          entity1_id: ids[a],
          entity2_id: ids[b],
          selected_entity_id: aWins ? ids[a] : ids[b],
        });
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  }, 600_000); // 3,000 comparisons recorded: seconds quiet, minutes on a loaded machine
  afterAll(() => r?.close());

  const bootstrapPath = (seed: number, bootstrap = 1000) =>
    `/leaderboard/?method=bradley-terry&bootstrap=${bootstrap}&seed=${seed}`;

  /** The service's metrics exposition. */
  const metricsText = async () => (await fetch(`${r.svc.metricsUrl}/metrics`)).text();
  /** Leaderboard requests ended whose status `matches`, by switchyard_requests_total. */
  const leaderboardAnswers = async (matches: (status: string) => boolean) =>
    (await metricsText())
      .split('\n')
      .filter((l) => l.startsWith('switchyard_requests_total{') && l.includes('leaderboard'))
      .filter((l) => matches(/status="(\d+)"/.exec(l)?.[1] ?? ''))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

  /**
   * Round trips of the second client, one every 10 ms or so, until `until` says stop. Paced, as
   * a client is: back to back, the test's own loop (client and service share it) would keep the
   * process busy and measure the machine's scheduler and garbage collector rather than the fit.
   */
  async function roundTrips(until: () => boolean, atLeast: number): Promise<number[]> {
    const times: number[] = [];
    completedBeforeUntil = 0;
    while (times.length < atLeast || !until()) {
      if (times.length > 0) await sleep(10);
      const t = performance.now();
      const res = await r.get('/entities/?limit=5');
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      times.push(performance.now() - t);
      if (!until()) completedBeforeUntil++;
    }
    return times;
  }
  /** Round trips of the last `roundTrips` answered before `until` said stop (during the fit). */
  let completedBeforeUntil = 0;

  it('serves a second client while a bootstrap of 100 runs (answers counted; delays printed)', async () => {
    const metrics = `${r.svc.metricsUrl}/metrics`;
    // Control: the same client for 2 s with no fit, its round trips the baseline. On a machine
    // so busy that the loop is late by over 50 ms more than 1% of the time without any fit,
    // the fit must not make it later than that; otherwise the budget is 50 ms.
    const controlStart = await readLoopDelay(metrics);
    const controlEnd = performance.now() + 2000;
    const baseline = await roundTrips(() => performance.now() > controlEnd, 40);
    const control = loopDelayBetween(controlStart, await readLoopDelay(metrics));
    const before = await readLoopDelay(metrics);

    let done = false;
    const started = performance.now();
    const client = new AbortController();
    onTestFinished(() => client.abort()); // a fit still running when this test ends is stopped
    const fit = fetch(`${r.url}${bootstrapPath(randomInt(2 ** 31), 100)}`, { signal: client.signal }).then(
      async (res) => {
        const body = await res.json();
        done = true;
        return { status: res.status, body: body as Array<Record<string, number>> };
      },
    );
    const during = await roundTrips(() => done, 20);
    const { status, body } = await fit;
    const fitMs = performance.now() - started;
    const window = loopDelayBetween(before, await readLoopDelay(metrics));

    expect(status).toBe(200);
    expect(body).toHaveLength(ENTITIES);
    for (const row of body) expect(row.bt_ci_lower).toBeLessThanOrEqual(row.bt_ci_upper as number);
    // The second client was served while the fit ran: requests answered before it ended, counted
    // (a fit on the service's loop would hold every one of them until its end). Round-trip times
    // and the loop delay are printed, not bounded: both move with the machine's load (issue 32;
    // before: median within 10× of the baseline, p99 delay under 50 ms).
    const servedDuringFit = completedBeforeUntil;
    expect(servedDuringFit, `answered during the fit: ${servedDuringFit}`).toBeGreaterThanOrEqual(10);
    console.info(
      `bootstrap=100 over ${COMPARISONS} comparisons: fit ${fitMs.toFixed(0)} ms; second client median ` +
        `${median(baseline).toFixed(2)} ms alone, ${median(during).toFixed(2)} ms during (${during.length} requests, ` +
        `max ${Math.max(...during).toFixed(1)} ms); loop delay p99 <= ${window.p99 * 1000} ms over ${window.count} ticks ` +
        `(without the fit: <= ${control.p99 * 1000} ms)`,
    );
  }, 600_000); // no time asserted: the fit took 179 s with busy loops on both cores

  it('refuses a bootstrap over the documented maximum, naming the parameter', async () => {
    const res = await r.get(bootstrapPath(1, 1001));
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({
      detail: [expect.objectContaining({ type: 'less_than_equal', loc: ['query', 'bootstrap'], ctx: { le: 1000 } })],
    });
  });

  it('runs one fit at a time: another is 503 with Retry-After, and a fit whose client left is stopped', async () => {
    const clients = [new AbortController(), new AbortController()];
    onTestFinished(() => {
      for (const c of clients) c.abort();
    });
    const notRefused = (status: string) => status !== '503';
    const [endedBefore, answeredBefore, abandonedBefore] = [
      await leaderboardAnswers(notRefused),
      await leaderboardAnswers((st) => st === '200'),
      await leaderboardAnswers((st) => st === '499'),
    ];
    const startFit = (i: number) =>
      fetch(`${r.url}${bootstrapPath(randomInt(2 ** 31))}`, { signal: clients[i]?.signal }).then(
        (res) => ({ i, res }),
        (err: Error) => ({ i, err }),
      );
    // Two fits of 1000, the second sent once the first is at the service: whichever takes the slot
    // holds it (seconds quiet, minutes loaded), the other is refused at once. No sleep decides
    // which: the first to end is the refused one.
    const one = startFit(0);
    await until(async () => (sample(await metricsText(), 'switchyard_requests_in_flight') ?? 0) >= 1);
    const two = startFit(1);
    const refused = await Promise.race([one, two]);
    const holder = refused.i === 0 ? 1 : 0;
    if (!('res' in refused)) throw refused.err;
    expect(refused.res.status).toBe(503);
    expect(refused.res.headers.get('retry-after')).toBe('1');
    expect(await refused.res.json()).toEqual({ detail: expect.stringMatching(/fits running \(at most 1\)/) });

    // The client goes away: its fit is stopped, its request ends without an answer (a fit left
    // running would end in 200 after its bootstrap of 1000; the time limit is out of reach), and
    // its slot is free: the next fit is accepted (a fit left running would hold the only slot).
    clients[holder]?.abort();
    expect('err' in (await (holder === 0 ? one : two))).toBe(true);
    await until(async () => (await leaderboardAnswers(notRefused)) > endedBefore);
    expect(await leaderboardAnswers((st) => st === '200')).toBe(answeredBefore);
    // Counted as abandoned by its client (499), not as a 404 (issue 32).
    expect(await leaderboardAnswers((st) => st === '499')).toBe(abandonedBefore + 1);
    expect(await leaderboardAnswers((st) => st === '404')).toBe(0);
    const res = await fetch(`${r.url}${bootstrapPath(randomInt(2 ** 31), 5)}`);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }, 600_000);

  describe('with a time limit of 200 ms', () => {
    let limited: StartedService;
    beforeAll(async () => {
      limited = await startService(config, {
        env: { ...r.env, RANK_BT_TIMEOUT_MS: '200' },
      });
    });
    afterAll(() => limited?.close());

    it('stops a fit at its limit: 504 in the service dialect', async () => {
      const res = await fetch(`${limited.url}${bootstrapPath(randomInt(2 ** 31))}`);
      expect(res.status).toBe(504);
      // The limit, not the work, ended it: the answer names the limit (not timed against the whole
      // fit, which a loaded machine slows differently).
      expect(await res.json()).toEqual({ detail: expect.stringMatching(/time limit \(200 ms\).*bootstrap/) });
      // The slot is free again: the next fit is run (and stopped) rather than refused with 503.
      expect((await fetch(`${limited.url}${bootstrapPath(randomInt(2 ** 31))}`)).status).toBe(504);
    });
  });
});
