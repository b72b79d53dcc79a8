/**
 * Memory returns after a burst (issue 16, "Bounded memory"): the embedding service
 * (configs/embedding.yaml, `switchyard serve` in its own process, tiny generated model) takes a
 * burst, goes idle, and its memory comes back near where it was before the burst, by the idle trim
 * (runtime/service/idle-trim.ts, `limits.idle_trim_ms` shortened to 2 s here). Two bursts:
 * 3 rounds of 8 concurrent POST /v1/process of distinct 1 MB pages from a local site, then
 * 3 rounds of 8 concurrent POST /v1/embed of 96 texts of 10,000 characters. The pages are plain
 * text: HTML would be extracted in worker threads at nice 19, which two busy loops on a 2-core
 * machine slow 20x and more (24 pages of 0.3-0.7 s each could not finish in minutes; issue 32),
 * and what is asserted here is the main thread's memory, which the extraction workers do not hold.
 *
 * Asserted, as properties the machine's load cannot change: a trim ran, and what the main thread
 * still holds after it (heap used + external memory, i.e. live objects after a full collection)
 * is at most 35% of the burst's peak growth over the baseline (measured with the trim 3-8%, without
 * it 75-85%: V8 does not collect an idle process). Not asserted: RSS. What glibc's malloc arenas of
 * the session workers (onnxruntime) keep varies with the run and the machine's load (with the trim
 * 20-60% of the peak growth, widest under parallel test load; without it 51-81%), so RSS is printed
 * as a figure, and recorded in bench/README.md ("Memory after a burst"), not bounded here (issue 32).
 * The figures (and the trim's log line, with its collections' pauses) are printed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateTinyModel } from '../fixtures/embed-stages.ts';
import { loopDelayBetween, readLoopDelay } from '../helpers/event-loop.ts';
import { sample } from '../helpers/prometheus.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';

const IDLE_TRIM_MS = 2000;
const MB = 2 ** 20;

/** About `bytes` of plain-text article: paragraphs of varied words, different for every `n`. */
function page(n: number, bytes: number): string {
  const words = ['bees', 'honey', 'hive', 'nectar', 'flower', 'pollen', 'queen', 'worker', 'wax', 'comb', 'swarm'];
  let seed = n * 7919 + 1;
  const parts = [`Page ${n}\n\n`];
  let size = parts[0].length;
  while (size < bytes) {
    const p: string[] = [];
    for (let i = 0; i < 80; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      p.push(`${words[seed % words.length]}${seed % 97}`);
    }
    parts.push(`${p.join(' ')}.\n\n`);
    size += parts[parts.length - 1].length;
  }
  return parts.join('');
}

interface Reading {
  rss: number;
  heapExternal: number;
  trims: number;
}

let dir: string;
let site: Server;
let siteUrl: string;
let svc: ServiceProcess;

async function reading(): Promise<Reading> {
  const text = await (await fetch(svc.metricsUrl)).text();
  const value = (name: string) => sample(text, name) ?? Number.NaN;
  return {
    rss: value('process_resident_memory_bytes'),
    heapExternal: value('nodejs_heap_size_used_bytes') + value('nodejs_external_memory_bytes'),
    trims: value('switchyard_memory_trims_total'),
  };
}

/** The service's RSS from /proc (cheap enough to sample every 50 ms during a burst). */
function rssNow(): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${svc.child.pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

async function post(path: string, body: unknown): Promise<string> {
  const res = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text.slice(0, 300)}`);
  return text;
}

/**
 * Runs `burst` from an idle baseline, then waits (up to 90 s) for the memory to come back; returns
 * the baseline, the peaks, what is left, the trims counted and the loop delay while idle.
 */
async function burstAndIdle(burst: () => Promise<void>) {
  const baseline = await reading();
  let peakRss = baseline.rss;
  let peakHeap = baseline.heapExternal;
  const rssTimer = setInterval(() => {
    peakRss = Math.max(peakRss, rssNow());
  }, 50);
  const heapTimer = setInterval(() => {
    void reading().then((r) => {
      peakHeap = Math.max(peakHeap, r.heapExternal);
    });
  }, 250);
  try {
    await burst();
  } finally {
    clearInterval(rssTimer);
    clearInterval(heapTimer);
  }
  const end = await reading();
  peakRss = Math.max(peakRss, end.rss);
  peakHeap = Math.max(peakHeap, end.heapExternal);
  const loopBefore = await readLoopDelay(svc.metricsUrl);
  const deadline = Date.now() + 90_000;
  const back = (r: Reading) => r.heapExternal - baseline.heapExternal <= 0.35 * (peakHeap - baseline.heapExternal);
  let after = end;
  await new Promise((r) => setTimeout(r, IDLE_TRIM_MS));
  while (Date.now() < deadline) {
    after = await reading();
    if (back(after) && after.trims > baseline.trims) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const loop = loopDelayBetween(loopBefore, await readLoopDelay(svc.metricsUrl));
  const figures = {
    rss_mb: [baseline.rss, peakRss, after.rss].map((b) => Math.round(b / MB)),
    heap_external_mb: [baseline.heapExternal, peakHeap, after.heapExternal].map((b) => Math.round(b / MB)),
    trims: after.trims - baseline.trims,
    rss_left_share: Math.round((100 * (after.rss - baseline.rss)) / (peakRss - baseline.rss)) / 100,
    loop_p99_ms: loop.p99 * 1000,
  };
  return { baseline, peakRss, peakHeap, after, loop, figures };
}

function expectReturned(result: Awaited<ReturnType<typeof burstAndIdle>>): void {
  const { baseline, peakRss, peakHeap, after, figures } = result;
  const why = `baseline, peak, after idle: ${JSON.stringify(figures)}`;
  console.info(
    why,
    svc
      .stdout()
      .split('\n')
      .filter((l) => l.includes('idle memory trim'))
      .join('\n'),
  );
  // A burst worth measuring: the bounds below are fractions of this growth.
  expect(peakRss - baseline.rss, why).toBeGreaterThan(64 * MB);
  expect(after.heapExternal - baseline.heapExternal, why).toBeLessThanOrEqual(
    0.35 * (peakHeap - baseline.heapExternal),
  );
  expect(after.trims, why).toBeGreaterThan(baseline.trims);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'memory-burst-'));
  generateTinyModel(join(dir, 'models'), 'BGESmallENV15', { seed: 41 });
  const pages = new Map<number, string>();
  site = createServer((req, res) => {
    const n = Number(/^\/page\/(\d+)$/.exec(req.url ?? '')?.[1] ?? -1);
    if (n < 0) return void res.writeHead(404).end();
    if (!pages.has(n)) pages.set(n, page(n, n >= 1000 ? 4_000 : 1_000_000));
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(pages.get(n));
  });
  siteUrl = await listenLocal(site);
}, 60_000);

/** A fresh service for each burst: a process's second burst reuses what its first one left. */
async function startEmbedding(): Promise<void> {
  svc = await spawnService(resolve(import.meta.dirname, '../../configs/embedding.yaml'), {
    env: { EMBED_MODELS_DIR: join(dir, 'models'), EMBED_FETCH_ALLOW: new URL(siteUrl).host, LOG_LEVEL: 'info' },
    set: [
      'resources.models.models={BGESmallENV15: {dimension: 32}}',
      `limits.idle_trim_ms=${IDLE_TRIM_MS}`,
      // Memory is measured here, not the time bounds: 8 fetches of 1 MB at once on a loaded
      // machine must not fail by time.
      'resources.fetcher.total_timeout_ms=600000',
      'resources.fetcher.read_timeout_ms=600000',
      'routes.1.pipeline.0.embed-process.fetch_timeout_ms=600000',
    ],
  });
  // Everything loaded once (model, both routes), then a quiet moment.
  await post('/v1/process', { url: `${siteUrl}/page/1000` });
  await post('/v1/embed', { text: ['warm up'] });
  await new Promise((r) => setTimeout(r, IDLE_TRIM_MS + 1500));
}

afterEach(async () => {
  await svc?.stop();
});

afterAll(async () => {
  if (site) closeNow(site);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('embedding service memory after a burst', () => {
  it('3 x 8 concurrent 1 MB pages through /v1/process: the heap comes back near the baseline when idle, by a trim', async () => {
    await startEmbedding();
    const result = await burstAndIdle(async () => {
      for (let round = 0; round < 3; round++) {
        const answers = await Promise.all(
          Array.from({ length: 8 }, (_, i) => post('/v1/process', { url: `${siteUrl}/page/${round * 8 + i}` })),
        );
        for (const answer of answers) expect(answer).toContain('"error":null');
      }
    });
    expectReturned(result);
  }, 600_000); // no time asserted: 288 s seen under four busy loops and other work on 2 cores

  it('3 x 8 concurrent /v1/embed of 96 texts of 10,000 characters: the same', async () => {
    await startEmbedding();
    const text = page(0, 20_000);
    const result = await burstAndIdle(async () => {
      for (let round = 0; round < 3; round++) {
        await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            post('/v1/embed', {
              text: Array.from({ length: 96 }, (_, j) => `${round} ${i} ${j} ${text.slice(j * 100, j * 100 + 10_000)}`),
            }),
          ),
        );
      }
    });
    expectReturned(result);
  }, 600_000); // no time asserted: 288 s seen under four busy loops and other work on 2 cores
});
