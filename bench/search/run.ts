/**
 * `npx tsx bench/search/run.ts`: how long the search service (configs/search.yaml) takes to fan
 * one query out to 10 result pages, against the slowest of those pages fetched alone.
 *
 * The fixture SearXNG (test/fixtures/searxng/searxng.ts) answers 10 URLs of the fixture site
 * (test/fixtures/searxng/site.ts): pages of BENCH_PAGE_WORDS words (2000) that answer after a
 * delay; nine take 100-300 ms, the last-ranked one BENCH_SLOW_MS (1000). The service runs as
 * its own process (in-process processor: content fetcher + words chunker), once with the
 * config's concurrency (5) and once with 10. Per round, measured back to back:
 *
 *   (a) the slowest page alone, fetched directly       — the floor of any fan-out
 *   (b) the 10 pages one after another, directly       — what no concurrency would cost
 *   (c) GET /v1/search, concurrency 5 (the config's)
 *   (d) GET /v1/search, concurrency 10
 *
 * Ratios are medians of per-round ratios: (c)/(a), (d)/(a), (d)/(b). The target (ours, the seed
 * has none): with as many pages at once as there are URLs, the search takes at most 1.25x the
 * slowest page, i.e. fetching, extraction, chunking and the meta-search add at most a quarter.
 *
 * Settings: BENCH_ROUNDS (7, plus one warm-up), BENCH_SLOW_MS (1000), BENCH_PAGE_WORDS (2000),
 * BENCH_KEEP_LOGS=1. Writes bench/results/search-<timestamp>.json.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { type SearxngFixture, startSearxng } from '../../test/fixtures/searxng/searxng.ts';
import { type Site, startSite } from '../../test/fixtures/searxng/site.ts';
import { envNum, runBench, waitUntilReady } from '../common/harness.ts';
import { fmt, machine, mid, printTable, verdict, writeResults } from '../common/report.ts';
import { freePort, type Started, start } from '../typed-proxy/children.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const settings = {
  rounds: Math.floor(envNum('BENCH_ROUNDS', 7)),
  slowMs: envNum('BENCH_SLOW_MS', 1000),
  pageWords: Math.floor(envNum('BENCH_PAGE_WORDS', 2000)),
  keepLogs: process.env.BENCH_KEEP_LOGS === '1',
};
const TARGET = 1.25;
const logDir = mkdtempSync(join(tmpdir(), 'bench-search-'));

/** Delays of the 10 result pages, in rank order: the slowest is ranked last (worst for a bounded pool). */
const delays = [100, 125, 150, 175, 200, 225, 250, 275, 300, settings.slowMs];

async function timeGet(url: string): Promise<{ ms: number; status: number; body: string }> {
  const started = performance.now();
  const res = await request(url);
  const body = await res.body.text();
  return { ms: performance.now() - started, status: res.statusCode, body };
}

async function startSearch(
  site: Site,
  searx: SearxngFixture,
  concurrency: number,
): Promise<{ s: Started; url: string }> {
  const [port, metrics, admin] = [await freePort(), await freePort(), await freePort()];
  const s = start(process.execPath, ['bin/switchyard.js', 'serve', 'configs/search.yaml'], {
    cwd: root,
    logFile: join(logDir, `search-c${concurrency}.log`),
    env: {
      ...process.env,
      SEARCH_PORT: String(port),
      SEARCH_METRICS_PORT: String(metrics),
      SEARCH_ADMIN_PORT: String(admin),
      SEARCH_BACKEND_URL: searx.url,
      SEARCH_FETCH_ALLOW: `127.0.0.1:${site.port}`,
      SEARCH_PROCESSOR: 'local',
      SEARCH_CONCURRENCY: String(concurrency),
      LOG_LEVEL: 'warn',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntilReady(s, `search (concurrency ${concurrency})`, 60000, async () => {
    const res = await request(`${url}/health`);
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`health ${res.statusCode}`);
  });
  return { s, url };
}

async function main(): Promise<number> {
  const site = await startSite();
  const pages = delays.map((ms, i) => `${site.url}/page/${i + 1}?delay=${ms}&words=${settings.pageWords}`);
  const searx = await startSearxng(() => pages);
  try {
    const c5 = await startSearch(site, searx, 5);
    const c10 = await startSearch(site, searx, 10);
    const search = async (url: string) => {
      const r = await timeGet(`${url}/v1/search?q=bench`);
      if (r.status !== 200) throw new Error(`search answered ${r.status}`);
      return r;
    };

    const rows: Array<{ slowest: number; sequential: number; c5: number; c10: number; chunks: number }> = [];
    for (let round = 0; round <= settings.rounds; round++) {
      const slowest = (await timeGet(pages[pages.length - 1])).ms;
      let sequential = 0;
      for (const p of pages) sequential += (await timeGet(p)).ms;
      const r5 = await search(c5.url);
      const r10 = await search(c10.url);
      const chunks = Object.keys(JSON.parse(r10.body)).length;
      if (round > 0) rows.push({ slowest, sequential, c5: r5.ms, c10: r10.ms, chunks }); // round 0 warms up
    }

    const m = (k: keyof (typeof rows)[number]) => mid(rows.map((r) => r[k]));
    const ratio = (a: 'c5' | 'c10', b: 'slowest' | 'sequential') => mid(rows.map((r) => r[a] / r[b]));
    const summary = {
      slowest_ms: m('slowest'),
      sequential_ms: m('sequential'),
      search_c5_ms: m('c5'),
      search_c10_ms: m('c10'),
      chunks: m('chunks'),
      ratio_c5_vs_slowest: ratio('c5', 'slowest'),
      ratio_c10_vs_slowest: ratio('c10', 'slowest'),
      ratio_c10_vs_sequential: ratio('c10', 'sequential'),
    };

    console.log(
      `\nsearch fan-out, 10 URLs of ${settings.pageWords} words, slowest ${settings.slowMs} ms, ${rows.length} rounds (median)\n`,
    );
    printTable(
      ['target', 'ms', 'vs (a)'],
      [
        ['(a) slowest page alone', fmt(summary.slowest_ms), '1.00'],
        [
          '(b) 10 pages one by one',
          fmt(summary.sequential_ms),
          fmt((summary.sequential_ms ?? 0) / (summary.slowest_ms ?? 1), 2),
        ],
        ['(c) search, concurrency 5', fmt(summary.search_c5_ms), fmt(summary.ratio_c5_vs_slowest, 2)],
        [
          '(d) search, concurrency 10',
          fmt(summary.search_c10_ms),
          fmt(summary.ratio_c10_vs_slowest, 2) + verdict((summary.ratio_c10_vs_slowest ?? Infinity) <= TARGET),
        ],
      ],
    );
    console.log(`\n(d)/(b): ${fmt(summary.ratio_c10_vs_sequential, 2)}; chunks per answer: ${fmt(summary.chunks, 0)}`);
    console.log(`target: (d)/(a) <= ${TARGET}`);
    writeResults(join(root, 'bench', 'results', `search-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), {
      settings: { ...settings, delays },
      machine: machine(false),
      summary,
      rounds: rows,
    });
    return 0;
  } finally {
    await Promise.all([site.close(), searx.close()]);
  }
}

await runBench(main, { logDir, keepLogs: settings.keepLogs });
