/**
 * Memory of the embedding service (configs/embedding.yaml, tiny generated model) through a burst
 * and the idle time after it: resident memory and the main thread's heap at start (baseline), at
 * the peak of the burst, and after 5, 15, 30 and 60 s of idle time, without any forced garbage
 * collection (then one forced collection, to show what was garbage). Two bursts, each in a fresh
 * service process:
 *
 * - process: 3 rounds of 8 concurrent POST /v1/process of distinct 1 MB pages from a local site;
 * - embed: 3 rounds of 8 concurrent POST /v1/embed of 96 texts of 10,000 characters.
 *
 *   npx tsx bench/embed/memory.ts [process|embed]...   (default both)
 *
 * The service runs in a child process (this file with `child`), which starts the service as
 * `switchyard serve` does and reports process.memoryUsage(), V8's heap statistics and its thread
 * count every 250 ms on stdout. Extra `--set` overrides: MEMORY_SET (comma-separated).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';

const root = fileURLToPath(new URL('../..', import.meta.url));
const MB = 2 ** 20;

export interface Sample {
  t: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  threads: number;
  malloced: number;
}

async function child(): Promise<void> {
  for (const flag of (process.env.SWITCHYARD_V8_FLAGS ?? '--no-allocation-site-pretenuring').split(/\s+/)) {
    if (flag) setFlagsFromString(flag);
  }
  const { startService } = await import('../../runtime/testing.ts');
  const { garbageCollector } = await import('../../runtime/util/collect-garbage.ts');
  const extra = (process.env.MEMORY_SET ?? '').split(',').filter(Boolean);
  const svc = await startService(resolve(root, 'configs/embedding.yaml'), {
    set: ['resources.models.models={BGESmallENV15: {dimension: 32}}', ...extra],
  });
  const sample = (): Sample => {
    const m = process.memoryUsage();
    const h = getHeapStatistics();
    return {
      t: Date.now(),
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
      threads: readdirSync('/proc/self/task').length,
      malloced: h.malloced_memory,
    };
  };
  process.stdout.write(`${JSON.stringify({ url: svc.url, metricsUrl: svc.metricsUrl })}\n`);
  setInterval(() => process.stdout.write(`${JSON.stringify(sample())}\n`), 250);
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line === 'gc') garbageCollector()?.();
  });
}

/** A deterministic page of about `bytes` bytes: an article of paragraphs of varied words. */
function page(n: number, bytes: number): string {
  const words = ['bees', 'honey', 'hive', 'nectar', 'flower', 'pollen', 'queen', 'worker', 'wax', 'comb', 'swarm'];
  let seed = n * 7919 + 1;
  const parts: string[] = [
    `<!DOCTYPE html><html><head><title>Page ${n}</title></head><body><article><h1>Page ${n}</h1>`,
  ];
  let size = parts[0].length;
  while (size < bytes) {
    const p: string[] = [];
    for (let i = 0; i < 80; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      p.push(`${words[seed % words.length]}${seed % 97}`);
    }
    const para = `<p>${p.join(' ')}.</p>\n`;
    parts.push(para);
    size += para.length;
  }
  parts.push('</article></body></html>');
  return parts.join('');
}

interface Run {
  samples: Sample[];
  url: string;
  proc: ChildProcess;
  gc(): void;
  stop(): Promise<void>;
}

async function startChild(env: Record<string, string>): Promise<Run> {
  const proc = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'child'], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const samples: Sample[] = [];
  const url = await new Promise<string>((resolveUrl, reject) => {
    proc.once('exit', (code) => reject(new Error(`service exited (${code})`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      if (!line.startsWith('{')) return;
      const value = JSON.parse(line) as Sample & { url?: string };
      if (value.url) resolveUrl(value.url);
      else if (value.rss !== undefined) samples.push(value);
    });
  });
  return {
    samples,
    url,
    proc,
    gc: () => proc.stdin!.write('gc\n'),
    stop: async () => {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    },
  };
}

/** Resident memory of a process by kind of mapping (diagnostics: MEMORY_SMAPS=1). */
export function smapsSummary(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let key = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      const start = Number.parseInt(head[1], 16);
      const name = head[3];
      // glibc's thread arenas are 64 MiB-aligned regions of their own.
      const arena = start % (64 * MB) === 0;
      key =
        name === '[heap]'
          ? 'brk heap'
          : name.startsWith('/')
            ? 'files'
            : name
              ? name
              : arena
                ? 'anon 64MiB-aligned'
                : 'anon';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[key] = (out[key] ?? 0) + Number(rss[1]) / 1024;
  }
  for (const k of Object.keys(out)) out[k] = Math.round(out[k]);
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const last = (run: Run) => run.samples[run.samples.length - 1];
const fmt = (s: Sample) =>
  `rss ${(s.rss / MB).toFixed(0)} heap ${(s.heapUsed / MB).toFixed(0)}/${(s.heapTotal / MB).toFixed(0)} ext ${(s.external / MB).toFixed(0)} ab ${(s.arrayBuffers / MB).toFixed(0)} thr ${s.threads}`;

async function burst(kind: string, run: Run, siteUrl: string): Promise<void> {
  for (let round = 0; round < 3; round++) {
    const requests = Array.from({ length: 8 }, async (_, i) => {
      const init =
        kind === 'process'
          ? { url: `${run.url}/v1/process`, body: { url: `${siteUrl}/page/${round * 8 + i}` } }
          : {
              url: `${run.url}/v1/embed`,
              body: {
                text: Array.from({ length: 96 }, (_, j) => `${round} ${i} ${j} ${page(j, 10_000).slice(0, 10_000)}`),
              },
            };
      const res = await fetch(init.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(init.body),
      });
      const text = await res.text();
      if (res.status !== 200 || (kind === 'process' && !text.includes('"error":null'))) {
        throw new Error(`${kind}: ${res.status} ${text.slice(0, 200)}`);
      }
    });
    await Promise.all(requests);
  }
}

export interface MemoryFigures {
  kind: string;
  baseline: Sample;
  peak: Sample;
  idle: Record<string, Sample>;
  forcedGc?: Sample;
}

async function measure(kind: string, siteUrl: string, modelsDir: string): Promise<MemoryFigures> {
  const run = await startChild({ EMBED_MODELS_DIR: modelsDir, EMBED_FETCH_ALLOW: new URL(siteUrl).host });
  try {
    await sleep(3000);
    const smaps = (at: string) => {
      if (process.env.MEMORY_SMAPS) console.log(kind, at, JSON.stringify(smapsSummary(run.proc.pid!)));
    };
    smaps('baseline');
    const baseline = last(run);
    const from = run.samples.length;
    await burst(kind, run, siteUrl);
    smaps('end of burst');
    const done = Date.now();
    const idle: Record<string, Sample> = {};
    for (const s of [5, 15, 30, 60]) {
      await sleep(done + s * 1000 - Date.now());
      idle[`${s}s`] = last(run);
    }
    smaps('idle 60s');
    const peak = run.samples.slice(from).reduce((a, b) => (b.rss > a.rss ? b : a));
    run.gc();
    await sleep(1500);
    const forcedGc = last(run);
    smaps('forced gc');
    return { kind, baseline, peak, idle, forcedGc };
  } finally {
    await run.stop();
  }
}

async function main(): Promise<void> {
  const kinds = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['process', 'embed'];
  const dir = mkdtempSync(join(tmpdir(), 'memory-bench-'));
  const { generateTinyModel } = await import('../../test/fixtures/embed-stages.ts');
  generateTinyModel(join(dir, 'models'), 'BGESmallENV15', { seed: 41 });
  const pages = new Map<string, string>();
  const site = createServer((req, res) => {
    const n = Number(/^\/page\/(\d+)$/.exec(req.url ?? '')?.[1] ?? -1);
    if (n < 0) {
      res.writeHead(404).end();
      return;
    }
    const key = String(n);
    if (!pages.has(key)) pages.set(key, page(n, 1_000_000));
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(pages.get(key));
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  const siteUrl = `http://127.0.0.1:${(site.address() as { port: number }).port}`;
  try {
    for (const kind of kinds) {
      const f = await measure(kind, siteUrl, join(dir, 'models'));
      console.log(`\n${kind}: baseline ${fmt(f.baseline)}`);
      console.log(`${kind}: peak     ${fmt(f.peak)}`);
      for (const [at, s] of Object.entries(f.idle)) console.log(`${kind}: idle ${at.padStart(3)} ${fmt(s)}`);
      if (f.forcedGc) console.log(`${kind}: forced gc ${fmt(f.forcedGc)}`);
    }
  } finally {
    site.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'child') await child();
else await main();
