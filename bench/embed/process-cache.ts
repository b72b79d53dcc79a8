/**
 * `POST /v1/process` of the embedding service: latency of a cache miss (fetch the page, extract
 * its text, chunk it, embed every chunk, store the result) against a cache hit (the same URL and
 * config again), end to end over HTTP.
 *
 * The service is the real one: `node bin/switchyard.js serve configs/embedding.yaml` in a child
 * process, config as shipped (in-memory cache, pool_size 2, batch_size 32, words chunker,
 * default config: chunks of 512 words, model BGESmallENV15), `LOG_LEVEL=warn`. Its default model
 * is a generated BERT (random weights, real bert-base-uncased vocabulary):
 *
 * - tiny: the test fixture's shape (2 layers, hidden 32), so a miss is mostly fetch, extraction,
 *   chunking and the stage's own work;
 * - bge-small-en-v1.5 shape (12 layers, hidden 384, dimension 384), the model a real deployment
 *   runs, so a miss is dominated by embedding. Generated once into $TMPDIR/switchyard-bench-embed,
 *   shared with bench/embed/run.ts. `BENCH_BGE=0` skips it.
 *
 * Pages come from a node:http server in this process (allow-listed in the fetcher by host:port):
 * distinct article-like HTML pages of 1,500 words (headings, paragraphs, nav and footer), so
 * every page gives 3 chunks (the count seen is printed). Each pair is a miss on a URL never asked for (X-Cache: MISS checked),
 * then a hit on the same URL (X-Cache: HIT checked); every answer must be 200 with chunks and no
 * error. A few pairs warm up first. Each round gives p50/p99 per side and a ratio of the p50s;
 * the table shows the median over the rounds.
 *
 *   npx tsx bench/embed/process-cache.ts     (~1 minute)
 *
 * Settings: BENCH_ROUNDS (default 3), BENCH_PAIRS (pairs per round, tiny model, default 100),
 * BENCH_BGE_PAIRS (pairs per round, bge-small shape, default 10), BENCH_BGE=0.
 * Writes bench/results/embed-process-cache-<timestamp>.json.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bertBaseUncasedVocab } from '../../scripts/models/bert-vocab.ts';
import { SeededRandom } from '../../scripts/models/seeded-random.ts';
import { generateTinyModel } from '../../test/fixtures/embed-stages.ts';
import { envNum, runBench, waitUntilReady } from '../common/harness.ts';
import { fmt, machine, mid, printTable, writeResults } from '../common/report.ts';
import { freePort, type Started, start, stop } from '../typed-proxy/children.ts';
import { benchModelsDir, ensureModel } from './shapes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const rounds = envNum('BENCH_ROUNDS', 3);
const workDir = mkdtempSync(join(tmpdir(), 'bench-process-cache-'));
const WARMUP_PAIRS = 3;
const PAGE_WORDS = 1500;

// ---- Pages ----

const words = bertBaseUncasedVocab().filter((w) => /^[a-z]{3,}$/.test(w));

/** An article of PAGE_WORDS words (headings included): sections of paragraphs of 8–20-word sentences, nav and footer. */
function article(seed: number): string {
  const random = new SeededRandom(seed);
  let left = PAGE_WORDS;
  const phrase = (n: number) => {
    const taken = Math.min(n, left);
    left -= taken;
    return Array.from({ length: taken }, () => random.pick(words)).join(' ');
  };
  const sentence = () => {
    const s = phrase(8 + random.int(13));
    return `${s[0].toUpperCase()}${s.slice(1)}.`;
  };
  const body: string[] = [];
  while (left > 0) {
    body.push(`<h2>${phrase(4)}</h2>`);
    for (let p = 0; p < 3 && left > 0; p++) {
      const sentences: string[] = [];
      for (let n = 4 + random.int(4); n > 0 && left > 0; n--) sentences.push(sentence());
      body.push(`<p>${sentences.join(' ')}</p>`);
    }
  }
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Article ${seed}</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/contact">Contact</a></nav>
<article><h1>Article ${seed}</h1>
${body.join('\n')}
</article><footer>Copyright 2026 Example Press</footer></body></html>`;
}

/** /article/<n>.html is page n (generated on first request, kept); anything else is 404. */
async function startPages(): Promise<{ server: Server; url: string }> {
  const cache = new Map<number, string>();
  const server = createServer((req, res) => {
    const m = /^\/article\/(\d+)\.html$/.exec(req.url ?? '');
    if (!m) {
      res.writeHead(404).end('not here');
      return;
    }
    const n = Number(m[1]);
    let html = cache.get(n);
    if (html === undefined) {
      html = article(n);
      cache.set(n, html);
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const address = server.address();
  return { server, url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}` };
}

// ---- The service ----

interface Service {
  s: Started;
  url: string;
}

async function startService(modelsDir: string, pagesHost: string, set: string[]): Promise<Service> {
  const [port, metrics, admin] = [await freePort(), await freePort(), await freePort()];
  const s = start(process.execPath, ['bin/switchyard.js', 'serve', 'configs/embedding.yaml', ...set], {
    cwd: root,
    env: {
      ...process.env,
      EMBED_PORT: String(port),
      EMBED_METRICS_PORT: String(metrics),
      EMBED_ADMIN_PORT: String(admin),
      EMBED_MODELS_DIR: modelsDir,
      EMBED_FETCH_ALLOW: pagesHost,
      EMBED_CACHE_PERSIST: '',
      LOG_LEVEL: 'warn',
    },
  });
  s.child.stdout?.resume();
  const url = `http://127.0.0.1:${port}`;
  // /ready is 503 until the preloaded default model is loaded.
  await waitUntilReady(s, 'embedding service', 60_000, async () => {
    const res = await fetch(`${url}/ready`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`/ready ${res.status}`);
  });
  return { s, url };
}

/** Chunks per page seen in the answers (reported with the table). */
const chunkCounts = new Set<number>();

/** One POST /v1/process, timed to the last byte of the body; checks the answer and its X-Cache. */
async function processOnce(service: Service, pageUrl: string, expect: 'HIT' | 'MISS'): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${service.url}/v1/process`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ url: pageUrl }),
  });
  const body = (await res.json()) as { chunks?: Record<string, string>; error?: string | null };
  const ms = performance.now() - t0;
  const cache = res.headers.get('x-cache');
  if (res.status !== 200 || body.error !== null || Object.keys(body.chunks ?? {}).length === 0) {
    throw new Error(`${pageUrl}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  }
  if (cache !== expect) throw new Error(`${pageUrl}: X-Cache ${cache}, expected ${expect}`);
  chunkCounts.add(Object.keys(body.chunks ?? {}).length);
  return ms;
}

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const v = [...values].sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))];
}

interface RoundFigures {
  miss_p50: number;
  miss_p99: number;
  hit_p50: number;
  hit_p99: number;
  ratio_p50: number;
}

let nextPage = 1;

/** Warm-up pairs, then `rounds` rounds of `pairs` miss/hit pairs on fresh pages. */
async function measure(service: Service, pagesUrl: string, pairs: number): Promise<RoundFigures[]> {
  const pair = async () => {
    const url = `${pagesUrl}/article/${nextPage++}.html`;
    return [await processOnce(service, url, 'MISS'), await processOnce(service, url, 'HIT')];
  };
  for (let i = 0; i < WARMUP_PAIRS; i++) await pair();
  const out: RoundFigures[] = [];
  for (let r = 0; r < rounds; r++) {
    const miss: number[] = [];
    const hit: number[] = [];
    for (let i = 0; i < pairs; i++) {
      const [m, h] = await pair();
      miss.push(m);
      hit.push(h);
    }
    const f = {
      miss_p50: percentile(miss, 50),
      miss_p99: percentile(miss, 99),
      hit_p50: percentile(hit, 50),
      hit_p99: percentile(hit, 99),
      ratio_p50: 0,
    };
    f.ratio_p50 = f.miss_p50 / f.hit_p50;
    out.push(f);
    console.log(
      `  round ${r + 1}: miss p50 ${fmt(f.miss_p50, 2)} p99 ${fmt(f.miss_p99, 2)} ms, hit p50 ${fmt(f.hit_p50, 2)} p99 ${fmt(f.hit_p99, 2)} ms`,
    );
  }
  return out;
}

function ensureBgeShape(): string {
  ensureModel('BGESmallENV15');
  return benchModelsDir;
}

async function main(): Promise<number> {
  const pages = await startPages();
  const pagesHost = new URL(pages.url).host;
  const runs = [
    {
      label: 'tiny model (2 layers, hidden 32)',
      pairs: envNum('BENCH_PAIRS', 100),
      modelsDir: () => {
        generateTinyModel(join(workDir, 'models'), 'BGESmallENV15', { seed: 31 });
        return join(workDir, 'models');
      },
      set: ['--set', 'resources.models.models={BGESmallENV15: {dimension: 32}}'],
    },
    ...(process.env.BENCH_BGE === '0'
      ? []
      : [
          {
            label: 'bge-small-en-v1.5 shape (12 layers, hidden 384)',
            pairs: envNum('BENCH_BGE_PAIRS', 10),
            modelsDir: ensureBgeShape,
            set: [],
          },
        ]),
  ];

  const rows: string[][] = [];
  const results: Record<string, unknown>[] = [];
  try {
    for (const run of runs) {
      const service = await startService(run.modelsDir(), pagesHost, run.set);
      console.log(`\n${run.label}: ${run.pairs} pairs per round, ${rounds} rounds`);
      try {
        const figures = await measure(service, pages.url, run.pairs);
        const med = (k: keyof RoundFigures) => mid(figures.map((f) => f[k])) ?? Number.NaN;
        rows.push([
          run.label,
          fmt(med('miss_p50'), 2),
          fmt(med('miss_p99'), 2),
          fmt(med('hit_p50'), 2),
          fmt(med('hit_p99'), 2),
          fmt(med('ratio_p50'), 1),
        ]);
        results.push({ model: run.label, pairs_per_round: run.pairs, rounds: figures });
      } finally {
        await stop(service.s.child);
      }
    }
  } finally {
    pages.server.closeAllConnections();
    pages.server.close();
  }

  console.log(
    `\nPOST /v1/process, ms (pages of ~${PAGE_WORDS} words: ${[...chunkCounts].sort().join(' or ')} chunks of up to 512 words; median of ${rounds} rounds)\n`,
  );
  printTable(['', 'miss p50', 'miss p99', 'hit p50', 'hit p99', 'miss/hit (p50)'], rows);
  writeResults(
    join(root, 'bench', 'results', `embed-process-cache-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
    {
      machine: machine(false),
      page_words: PAGE_WORDS,
      chunks_per_page: [...chunkCounts].sort(),
      results,
    },
  );
  return 0;
}

// runBench stops the service on error or Ctrl-C and removes the work dir (the tiny model).
await runBench(main, { logDir: workDir, keepLogs: false });
