/**
 * The extraction worker pool of the content fetcher: a page past its time bound or whose caller
 * gives up has its worker terminated (the only way to stop a synchronous parse) and the next page
 * gets a fresh worker; workers beyond the pool size wait in order; a worker's heap is capped.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ExtractPool, ExtractTimeoutError } from '../../plugins/content-fetcher/extract-pool.ts';

/** The page that kept a service's event loop busy for 41 s before extraction moved to workers. */
const DIVS = `<html><body>${'<div>'.repeat((64 * 1024) / 5)}deep</body></html>`;
const ARTICLE = `<html><head><title>Bees</title></head><body><p>${'Bees make honey. '.repeat(30)}</p></body></html>`;
const patience = () => AbortSignal.timeout(60_000);

let pool: ExtractPool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe('extraction pool', () => {
  it('extracts a page in a worker', async () => {
    pool = new ExtractPool({ workers: 1, timeoutMs: 20_000, maxHeapMb: 256, idleMs: 5000 });
    const { title, text } = await pool.run(ARTICLE, patience());
    expect(title).toBe('Bees');
    expect(text).toContain('Bees make honey.');
  });

  it('a page past the time bound fails with ExtractTimeoutError; its worker is replaced', async () => {
    pool = new ExtractPool({ workers: 1, timeoutMs: 1000, maxHeapMb: 256, idleMs: 5000 });
    await expect(pool.run(DIVS, patience())).rejects.toBeInstanceOf(ExtractTimeoutError);
    expect((await pool.run(ARTICLE, patience())).title).toBe('Bees');
  });

  it('a caller that gives up stops the extraction at once, long before the time bound', async () => {
    pool = new ExtractPool({ workers: 1, timeoutMs: 60_000, maxHeapMb: 256, idleMs: 5000 });
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
