/**
 * The extraction worker pool of the content fetcher: a page past its time bound or whose caller
 * gives up has its worker terminated (the only way to stop a synchronous parse) and the next page
 * gets a fresh worker; workers beyond the pool size wait in order; a worker's heap is capped.
 *
 * No ordinary page races a time bound here (issue 32): the workers run at nice 19, so two busy
 * loops on a 2-core machine slow an extraction 20x and more (a 30 ms first page went past 1 s).
 * Where an ordinary page follows a page cut by the bound in the same pool, the pool's clock is the
 * test's (fake setTimeout): the bound fires when the test moves the clock, never by the machine.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExtractPool, ExtractTimeoutError } from '../../plugins/content-fetcher/extract-pool.ts';

/** The page that kept a service's event loop busy for 41 s before extraction moved to workers. */
const DIVS = `<html><body>${'<div>'.repeat((64 * 1024) / 5)}deep</body></html>`;
const ARTICLE = `<html><head><title>Bees</title></head><body><p>${'Bees make honey. '.repeat(30)}</p></body></html>`;
const patience = () => AbortSignal.timeout(600_000); // out of reach: an ordinary page at nice 19 took 18 s loaded
const realSetTimeout = setTimeout;
const sleep = (ms: number) => new Promise((r) => realSetTimeout(r, ms));

let pool: ExtractPool | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await pool?.close();
  pool = undefined;
});

// Generous: no time is asserted, and a loaded machine gives the nice-19 workers little CPU.
describe('extraction pool', { timeout: 180_000 }, () => {
  it('extracts a page in a worker', async () => {
    pool = new ExtractPool({ workers: 1, timeoutMs: 600_000, maxHeapMb: 256, idleMs: 5000 });
    const { title, text } = await pool.run(ARTICLE, patience());
    expect(title).toBe('Bees');
    expect(text).toContain('Bees make honey.');
  });

  it('a page past the time bound fails with ExtractTimeoutError; its worker is replaced', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    pool = new ExtractPool({ workers: 1, timeoutMs: 1000, maxHeapMb: 256, idleMs: 5000 });
    const hostile = pool.run(DIVS, patience());
    // The page's clock starts once its worker is ready (real time: the worker starting up).
    while (vi.getTimerCount() === 0) await sleep(10);
    vi.advanceTimersByTime(999);
    expect(pool.size).toBe(1); // still parsing: the bound is not reached
    vi.advanceTimersByTime(1);
    await expect(hostile).rejects.toBeInstanceOf(ExtractTimeoutError);
    expect(pool.size).toBe(0); // its worker terminated
    // A fresh worker for the next page, whose clock the test does not move.
    expect((await pool.run(ARTICLE, patience())).title).toBe('Bees');
    expect(pool.size).toBe(1);
  });

  it('a caller that gives up stops the extraction at once, long before the time bound', async () => {
    pool = new ExtractPool({ workers: 1, timeoutMs: 600_000, maxHeapMb: 256, idleMs: 5000 });
    await pool.run(ARTICLE, patience()); // the worker is up
    const caller = new AbortController();
    const running = pool.run(DIVS, caller.signal);
    // Queued behind the hostile page in a one-worker pool: it runs only once that worker is gone.
    const next = pool.run(ARTICLE, patience());
    setTimeout(() => caller.abort(new Error('client went away')), 200);
    await expect(running).rejects.toThrow('client went away');
    expect((await next).title).toBe('Bees');
  });

  it('a queued page whose caller gives up leaves the queue without running', async () => {
    pool = new ExtractPool({ workers: 1, timeoutMs: 500, maxHeapMb: 256, idleMs: 5000 });
    const hostile = pool.run(DIVS, patience());
    const caller = new AbortController();
    const queued = pool.run(ARTICLE, caller.signal);
    caller.abort(new Error('gone'));
    await expect(queued).rejects.toThrow('gone');
    await expect(hostile).rejects.toBeInstanceOf(ExtractTimeoutError);
  });
});
