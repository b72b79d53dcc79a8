/**
 * Hostile pages against the embedding service (configs/embedding.yaml, POST /v1/process) and the
 * search service (configs/search.yaml), both started in this process from their configs, pages
 * served by a local site allow-listed for its port only: 64 KiB of unclosed <div>s (the page
 * that blocked /health for 41 s) and a 2 MiB page. Text extraction runs in worker threads with a
 * time bound, so while those pages are processed the event loop stays responsive: a second
 * client's /health is answered over and over (counted: a frozen loop answers once at best), and
 * the page fails alone. The loop delay (p99, by a histogram of this process, which is the services'
 * process) is printed next to this machine's own bound (three times the delay measured with the
 * same /health traffic while as many plain busy threads spin), not asserted: on a loaded machine
 * with fewer free cores than busy threads the loop is delayed by any busy thread, ours or not
 * (issue 32). Before the fix the loop froze for 25-41 s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { generateTinyModel } from '../fixtures/embed-stages.ts';
import { type SearxngFixture, startSearxng } from '../fixtures/searxng/searxng.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

const EXTRACT_TIMEOUT_MS = 3000;
const DIVS = `<html><body>${'<div>'.repeat((64 * 1024) / 5)}deep</body></html>`;
// Just under the search service's 2 MiB cap: nested, unclosed blocks with text in each.
const BIG = `<html><body>${'<div><p>bees make honey '.repeat(Math.floor((2 * 1024 * 1024 - 100) / 23))}</body></html>`;
// The ordinary page is plain text: the fetcher has one extraction bound for all pages, and an HTML
// page would race the hostile pages' 3 s in a fresh worker at nice 19, which a loaded machine slows
// 20x and more (issue 32: a page of 30 ms went past 3 s). That a worker cut by the bound is replaced
// and the next HTML page extracted is asserted in fetch-content-extract-pool.test.ts, on the
// test's own clock.
const PLAIN = `Bees\n\n${'Bees collect nectar from flowers and turn it into honey inside the hive. '.repeat(8)}\n`;
const SECRET = 'tok-7f3a9c';

let dir: string;
let site: Server;
let siteUrl: string;
let searx: SearxngFixture;
const logLines: string[] = [];

/** Sends /health one after another until `work` settles; returns how many were answered 200. */
async function healthWhile(svc: StartedService, work: Promise<unknown>): Promise<number> {
  let done = false;
  void work.finally(() => {
    done = true;
  });
  let answered = 0;
  while (!done) {
    const res = await fetch(`${svc.url}/health`);
    await res.arrayBuffer();
    if (res.status === 200) answered++;
  }
  return answered;
}

/**
 * The p99 event-loop delay allowed: the issue's 50 ms, or three times the delay this machine gives with
 * `threads` busy threads at the extraction workers' priority and no page at all.
 */
async function loopDelayBound(svc: StartedService, threads: number): Promise<number> {
  const spin = "require('node:os').setPriority(19); const end = Date.now() + 1000; while (Date.now() < end);";
  const spinners = Array.from({ length: threads }, () => new Worker(spin, { eval: true }));
  const done = Promise.all(spinners.map((w) => new Promise((r) => w.once('exit', r))));
  const { p99Ms } = await withLoopDelay(() => healthWhile(svc, done));
  return Math.max(50, 3 * p99Ms);
}

/** Runs `work` with the event-loop delay histogram on; returns its result and the p99 delay in ms. */
async function withLoopDelay<T>(work: () => Promise<T>): Promise<{ value: T; p99Ms: number; maxMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  try {
    const value = await work();
    return { value, p99Ms: histogram.percentile(99) / 1e6, maxMs: histogram.max / 1e6 };
  } finally {
    histogram.disable();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hostile-pages-'));
  generateTinyModel(join(dir, 'models'), 'BGESmallENV15', { seed: 41 });
  site = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://site').pathname;
    const page = path === '/divs' ? DIVS : path === '/big' ? BIG : path === '/bees' ? PLAIN : undefined;
    if (page === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': `text/${page === PLAIN ? 'plain' : 'html'}; charset=utf-8` });
    res.end(page);
  });
  siteUrl = await listenLocal(site);
  searx = await startSearxng((q) => (q === 'hostile' ? [`${siteUrl}/divs`, `${siteUrl}/big`, `${siteUrl}/bees`] : []));
});

afterAll(async () => {
  if (site) closeNow(site);
  await searx?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('embedding service, POST /v1/process', () => {
  let svc: StartedService;
  beforeAll(async () => {
    const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
    svc = await startService(resolve(import.meta.dirname, '../../configs/embedding.yaml'), {
      env: { EMBED_MODELS_DIR: join(dir, 'models'), EMBED_FETCH_ALLOW: new URL(siteUrl).host, EMBED_POOL_SIZE: '1' },
      set: [
        'resources.models.models={BGESmallENV15: {dimension: 32}}',
        `resources.fetcher.extract_timeout_ms=${EXTRACT_TIMEOUT_MS}`,
        'routes.1.pipeline.0.embed-process.fetch_timeout_ms=600000', // the extraction bound is the one tested
      ],
      logger,
    });
  }, 180_000);
  afterAll(() => svc?.close());

  const process = (url: string) =>
    fetch(`${svc.url}/v1/process`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url }),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as { error: string | null } }));

  it('64 KiB of unclosed <div>s and a 2 MiB page fail alone; /health keeps answering (loop delay printed)', async () => {
    // The model loaded (the extraction workers start with the hostile pages).
    expect((await process(`${siteUrl}/bees`)).body.error).toBeNull();
    const bound = await loopDelayBound(svc, 2);
    const { value, p99Ms, maxMs } = await withLoopDelay(async () => {
      const pages = Promise.all([
        process(`${siteUrl}/divs?access_token=${SECRET}#frag`),
        process(`${siteUrl}/big?access_token=${SECRET}`),
      ]);
      const [health, answers] = await Promise.all([healthWhile(svc, pages), pages]);
      return { health, answers };
    });
    // The seed's dialect for a page that cannot be read: 200, error "Failed to scrape content".
    for (const answer of value.answers) {
      expect(answer).toEqual({ status: 200, body: expect.objectContaining({ error: 'Failed to scrape content' }) });
    }
    // A frozen loop answers /health once at best while a page is extracted for a full second: a
    // count. The loop delay is printed against this machine's own bound, not asserted: both move
    // with the machine's load (issue 32; the 50 ms is a figure for bench/README.md).
    expect(value.health).toBeGreaterThanOrEqual(2);
    console.info(
      `health answers ${value.health}; event-loop delay p99 ${p99Ms} ms, max ${maxMs} ms (bound ${bound} ms)`,
    );
    // The failed pages left the route working: an ordinary page is still processed.
    expect((await process(`${siteUrl}/bees?again`)).body.error).toBeNull();
  }, 300_000); // no time asserted; a loaded machine gives the nice-19 workers little CPU

  it('/v1/embed refuses a batch over max_total_chars with 413 naming the limit', async () => {
    const res = await fetch(`${svc.url}/v1/embed`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: Array.from({ length: 21 }, (_, i) => `${i} ${'w'.repeat(99_990)}`) }),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: string }).error).toContain('the limit (max_total_chars) is 2000000');
  });

  it('logs the failed page without its query string or fragment', () => {
    const failures = logLines.map((line) => JSON.parse(line)).filter((e) => e.msg === 'process: fetch failed');
    expect(failures.map((e) => e.url).sort()).toEqual([`${siteUrl}/big`, `${siteUrl}/divs`]);
    expect(failures.find((e) => e.url.endsWith('/divs'))?.err).toContain(`took longer than ${EXTRACT_TIMEOUT_MS} ms`);
    expect(logLines.join('\n')).not.toContain(SECRET);
  });
});

describe('search service, GET /v1/search', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(resolve(import.meta.dirname, '../../configs/search.yaml'), {
      env: {
        SEARCH_BACKEND_URL: searx.url,
        SEARCH_FETCH_ALLOW: new URL(siteUrl).host,
        LOG_LEVEL: process.env.HP_LOG ?? 'silent',
      },
      set: [`resources.fetcher.extract_timeout_ms=${EXTRACT_TIMEOUT_MS}`],
      warmupMs: 500,
    });
  }, 180_000);
  afterAll(() => svc?.close());

  it('hostile result pages are skipped, the good one answered; /health keeps answering (loop delay printed)', async () => {
    const bound = await loopDelayBound(svc, 2);
    const { value, p99Ms, maxMs } = await withLoopDelay(async () => {
      const search = fetch(`${svc.url}/v1/search?q=hostile`).then(async (res) => ({
        status: res.status,
        body: (await res.json()) as Record<string, [string, string]>,
      }));
      const [health, answer] = await Promise.all([healthWhile(svc, search), search]);
      return { health, answer };
    });
    expect(value.answer.status, JSON.stringify(value.answer.body)).toBe(200);
    const urls = new Set(Object.values(value.answer.body).map(([url]) => url));
    expect([...urls]).toEqual([`${siteUrl}/bees`]);
    expect(value.health).toBeGreaterThanOrEqual(2); // counted, as above; the delay printed
    console.info(
      `health answers ${value.health}; event-loop delay p99 ${p99Ms} ms, max ${maxMs} ms (bound ${bound} ms)`,
    );
  }, 300_000);
});
