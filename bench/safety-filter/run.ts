/**
 * `npm run bench:safety`: the safety filter (configs/safety-filter.yaml) on a ~2 KB chat prompt
 * against (a) the OpenAI-compatible backend called directly and (b) a bare Koa + undici proxy,
 * in one run, the load generator pinned to its own core (bench/typed-proxy's machinery). Then,
 * through the same processes: time to first byte of a streamed chat, and the RSS of the proxies
 * while a 10 MB answer streams through them. Prints tables, ratios and PASS/MISS against the
 * issue's targets; writes bench/results/safety-filter-<timestamp>.json. See bench/README.md.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parse as parseYaml } from 'yaml';
import { cpuUsPerRequest, envNum, runBench, runLoad, startNodeServer, waitUntilReady } from '../common/harness.ts';
import { fmt, machine, mid, printTable, signed, verdict, writeResults } from '../common/report.ts';
import { hasTaskset, type Started, start } from '../typed-proxy/children.ts';
import type { LoadJob, LoadResult } from '../typed-proxy/loadgen.ts';
import { clockTicks, readCpuTicks } from '../typed-proxy/proc.ts';
import { filterSets, writeBenchTenants } from './filter-setup.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));
const typedDir = join(root, 'bench', 'typed-proxy');

/** A count from the environment where 0 is a value (skip that part), unlike envNum. */
const envCount = (name: string, def: number) => {
  const n = Number(process.env[name] ?? def);
  return Number.isFinite(n) && n >= 0 ? n : def;
};
const list = (name: string, def = '') =>
  (process.env[name] ?? def)
    .split(';')
    .map((x) => x.trim())
    .filter(Boolean);
const settings = {
  config: process.env.BENCH_SAFETY_CONFIG ?? 'configs/safety-filter.yaml',
  /** The upstream of the config that the backend replaces. */
  upstream: process.env.BENCH_SAFETY_UPSTREAM ?? 'llm',
  /** Extra `--set` overrides for the filter, `;`-separated. */
  set: list('BENCH_SAFETY_SET'),
  /** A filter answer lacking this header counts as an error ('' = no check). */
  expectHeader: process.env.BENCH_SAFETY_EXPECT_HEADER ?? 'X-Filter-Decision',
  apiKey: process.env.SAFETY_BENCH_KEY ?? 'sk-dev-local-0001',
  model: process.env.BENCH_SAFETY_MODEL ?? 'gpt-4o-mini',
  warmupMs: envNum('BENCH_WARMUP', 2) * 1000,
  durationMs: envNum('BENCH_DURATION', 4) * 1000,
  connections: (process.env.BENCH_CONNECTIONS ?? '32,1').split(',').map((c) => Math.max(1, Number(c) || 1)),
  /** 0 skips the load measurements (streaming memory test only). */
  rounds: Math.max(0, Math.floor(Number(process.env.BENCH_ROUNDS ?? 3) || 0)),
  loadCpu: process.env.BENCH_LOAD_CPU ?? '0',
  targetCpu: process.env.BENCH_TARGET_CPU ?? '1',
  /** Size of the streamed answer of the memory test, MiB, and characters per delta. */
  streamMb: envNum('BENCH_STREAM_MB', 10),
  streamChunk: Math.floor(envNum('BENCH_STREAM_CHUNK', 256)),
  /** The slow reader's pace, MB/s: slower than the backend, so only backpressure keeps memory flat. */
  slowReaderMbps: envNum('BENCH_STREAM_SLOW_MBPS', 5),
  streamRepeat: Math.floor(envNum('BENCH_STREAM_REPEAT', 3)),
  /** Then an answer this many times larger, `bigRepeat` times per reader: what holding it would scale with. */
  streamScale: envNum('BENCH_STREAM_SCALE', 5),
  bigRepeat: Math.floor(envNum('BENCH_STREAM_BIG_REPEAT', 2)),
  /**
   * Time to first and last token: a model generating these many characters per second, in deltas
   * of 4, clean text and text with an e-mail address in its first sentence, `ttftRepeat` streams
   * each; answers of `pacedSeconds` of generation (at least 200 characters).
   */
  pacedCps: (process.env.BENCH_PACED_CPS ?? '50,200,800').split(',').map((c) => Math.max(1, Number(c) || 1)),
  pacedSeconds: envNum('BENCH_PACED_SECONDS', 1.5),
  ttftRepeat: Math.floor(envCount('BENCH_TTFT_REPEAT', 5)),
  /** CPU per streamed chunk: an answer of this many 4-character deltas, sent as fast as it goes. */
  cpuChunks: Math.floor(envCount('BENCH_CPU_CHUNKS', 100000)),
  /** Another checkout of the repository (its node_modules present): its filter's CPU per chunk too. */
  baseline: process.env.BENCH_SAFETY_BASELINE,
  startTimeoutMs: envNum('BENCH_START_TIMEOUT', 90) * 1000,
  keepLogs: process.env.BENCH_KEEP_LOGS === '1',
};

const labels = { direct: '(a) backend direct', bare: '(b) bare Koa + undici', filter: '(c) safety filter' } as const;
type TargetKey = keyof typeof labels;

/** The issue's targets ("Measured", bench/safety-filter). */
const goals = {
  addedTtftMs: 30, // (c) - (a), median time to first token of clean text at 200 and 800 characters/s (issue 26)
  chunkCpuRatio: 1.2, // (c) / (c0) CPU per streamed chunk, this checkout against a baseline one
  cpuRatio: 1.5, // (c)/(b) CPU per request, at most
  rpsRatio: 0.8, // (c)/(b) throughput, at least
  addedP50Ms: 1, // (c) - (a), 1 connection
  addedP99Ms: 3,
  ttfbOverheadMs: 5, // (c) - (a), median time to first byte of a stream
  rssGrowthShare: 0.5, // peak RSS growth while streaming, as a share of the answer's size (holding it is >= 1)
};

/** A ~2 KB chat request: a system prompt and an ordinary user question, nothing any rule should act on. */
const sentences = [
  'Please summarise the notes from our weekly planning meeting for the team newsletter.',
  'We reviewed the roadmap for the next quarter and agreed to focus on reliability first.',
  'The search feature will ship after the indexing service has been load tested.',
  'Two new engineers join the platform group next month and need onboarding material.',
  'The design review for the billing page moved to Thursday afternoon.',
  'Customer feedback on the mobile app was mostly positive, with requests for dark mode.',
  'We still need a volunteer to update the deployment runbook before the holidays.',
  'Keep the summary short, friendly and in plain language, with one bullet per topic.',
];
function chatBody(stream: boolean, model = settings.model): string {
  const messages = [
    { role: 'system', content: 'You are a helpful assistant that writes concise summaries.' },
    { role: 'user', content: '' },
  ];
  for (let i = 0; JSON.stringify({ model, messages }).length < 2000; i++) {
    messages[1].content += `${sentences[i % sentences.length]} `;
  }
  return JSON.stringify({ model, messages, stream });
}
const plainBody = chatBody(false);
const streamBody = chatBody(true);
const headers = {
  'content-type': 'application/json',
  accept: 'application/json',
  authorization: `Bearer ${settings.apiKey}`,
};

interface Target {
  key: TargetKey;
  url: string;
  /** The process whose CPU per request and RSS are reported. */
  proc: Started;
  backend?: Started;
  expectHeader?: string;
}

interface Row {
  target: TargetKey;
  connections: number;
  round: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerReq: number;
  backendUsPerReq?: number;
  loadgenCpu: number;
  coreOthers?: number;
  requests: number;
  errors: number;
  firstError?: string;
}

const clk = clockTicks();
const pinned = hasTaskset() && cpus().length >= 2;
const pin = (cpu: string) => (pinned ? cpu : undefined);
const targetCore = pinned && /^\d+$/.test(settings.targetCpu) ? Number(settings.targetCpu) : undefined;
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-safety-'));
const stamp = new Date().toISOString().replace(/[:.]/g, '-');

/** One chat request as the load generator sends it; the answer must be the backend's completion. */
async function check(url: string, expectHeader?: string): Promise<Record<string, string>> {
  const res = await request(url, { method: 'POST', headers, body: plainBody, headersTimeout: 5000, bodyTimeout: 5000 });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 500)}`);
  let answer: { object?: unknown; choices?: Array<{ message?: { content?: unknown } }> } | undefined;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new Error(`not JSON: ${text.slice(0, 200)}`);
  }
  if (answer?.object !== 'chat.completion' || typeof answer.choices?.[0]?.message?.content !== 'string') {
    throw new Error(`not a chat.completion: ${text.slice(0, 500)}`);
  }
  if (expectHeader && res.headers[expectHeader.toLowerCase()] === undefined) {
    throw new Error(`no ${expectHeader} header (got ${JSON.stringify(res.headers)})`);
  }
  const seen: Record<string, string> = {};
  for (const [k, v] of Object.entries(res.headers)) if (k.startsWith('x-filter-')) seen[k] = String(v);
  return seen;
}

/** The filter as `switchyard serve`, its ports and its backend overridden; ready once a chat goes through. */
async function startFilter(
  backendPort: number,
  checkout = root,
  name = 'safety-filter',
): Promise<{ s: Started; url: string }> {
  const config = parseYaml(readFileSync(resolve(root, settings.config), 'utf8')) as Record<string, unknown>;
  const { port, sets } = await filterSets(backendPort, {
    upstream: settings.upstream,
    listeners: ['metrics', 'admin'].filter((listener) => config?.[listener]),
  });
  // The overrides are this checkout's (a baseline may not know its options).
  if (checkout === root) sets.push(...settings.set);
  const logFile = join(logDir, `${name}.log`);
  const tenants = writeBenchTenants(logDir, settings.apiKey, settings.upstream);
  const s = start(
    process.execPath,
    ['bin/switchyard.js', 'serve', resolve(checkout, settings.config), ...sets.flatMap((x) => ['--set', x])],
    {
      cpu: pin(settings.targetCpu),
      cwd: checkout,
      env: {
        ...process.env,
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
        FILTER_TENANTS_FILE: process.env.FILTER_TENANTS_FILE ?? tenants,
        FILTER_AUDIT_PATH: process.env.FILTER_AUDIT_PATH ?? join(logDir, `${name}-audit.db`),
      },
      logFile,
    },
  );
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  await waitUntilReady(s, 'safety filter', settings.startTimeoutMs, () =>
    check(url, settings.expectHeader || undefined),
  );
  return { s, url };
}

/** One closed-loop measurement by the pinned load generator. */
async function load(t: Target, connections: number, warmupMs: number, firstByte = false): Promise<LoadResult> {
  const job: LoadJob = {
    url: t.url,
    connections,
    warmupMs,
    durationMs: settings.durationMs,
    body: firstByte ? streamBody : plainBody,
    headers,
    expectHeader: t.expectHeader,
    firstByte,
    pids: t.backend ? [t.proc.pid, t.backend.pid] : [t.proc.pid],
    targetCore,
  };
  return runLoad(job, pin(settings.loadCpu));
}

function toRow(t: Target, connections: number, round: number, r: LoadResult): Row {
  const perReq = (pid: number) => cpuUsPerRequest(r, pid, clk);
  const none = r.requests === 0 ? Number.NaN : 0; // no answer counted: no latency either
  return {
    target: t.key,
    connections,
    round,
    rps: r.rps,
    p50Ms: r.latencyMs.p50 + none,
    p99Ms: r.latencyMs.p99 + none,
    cpuUsPerReq: perReq(t.proc.pid),
    backendUsPerReq: t.backend ? perReq(t.backend.pid) : undefined,
    loadgenCpu: r.loadgenCpu,
    coreOthers: r.targetCoreOthers,
    requests: r.requests,
    errors: r.errors,
    firstError: r.firstError,
  };
}

/** Resident set size of a process, KiB (VmRSS in /proc/<pid>/status). */
function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : Number.NaN;
}

interface StreamResult {
  target: TargetKey;
  reader: 'fast' | 'slow';
  answerBytes: number;
  contentChars: number;
  wireBytes: number;
  done: boolean;
  finishReason?: string;
  ttfbMs: number;
  totalMs: number;
  rssBeforeKb: number;
  rssPeakKb: number;
  /** Peak RSS growth of the proxy while the answer streamed, KiB. */
  rssGrowthKb: number;
  backendRssGrowthKb?: number;
}

/**
 * Streams a `huge-<n>` answer through a target and samples the RSS of the proxy (and of the
 * backend) every few ms. The slow reader paces itself: a proxy that ignores backpressure then
 * has to hold what the backend sends faster than the client reads.
 */
async function streamThrough(t: Target, answerBytes: number, reader: 'fast' | 'slow'): Promise<StreamResult> {
  const body = chatBody(true, `huge-${answerBytes}`);
  const before = rssKb(t.proc.pid);
  const backendBefore = t.backend ? rssKb(t.backend.pid) : undefined;
  let peak = before;
  let backendPeak = backendBefore ?? 0;
  const sample = () => {
    peak = Math.max(peak, rssKb(t.proc.pid));
    if (t.backend) backendPeak = Math.max(backendPeak, rssKb(t.backend.pid));
  };
  const timer = setInterval(sample, 5);
  const started = process.hrtime.bigint();
  const ms = () => Number(process.hrtime.bigint() - started) / 1e6;
  let ttfbMs = Number.NaN;
  let wireBytes = 0;
  let contentChars = 0;
  let done = false;
  let finishReason: string | undefined;
  try {
    const res = await request(t.url, { method: 'POST', headers, body, headersTimeout: 10000, bodyTimeout: 30000 });
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
    const decoder = new TextDecoder();
    let pending = '';
    const bytesPerMs = (settings.slowReaderMbps * 1e6) / 1000;
    for await (const chunk of res.body) {
      if (wireBytes === 0) ttfbMs = ms();
      wireBytes += chunk.length;
      pending += decoder.decode(chunk, { stream: true });
      const events = pending.split('\n\n');
      pending = events.pop() ?? '';
      for (const event of events) {
        const data = event.startsWith('data: ') ? event.slice(6) : undefined;
        if (data === undefined) continue;
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        const parsed = JSON.parse(data);
        contentChars += parsed.choices?.[0]?.delta?.content?.length ?? 0;
        finishReason = parsed.choices?.[0]?.finish_reason ?? finishReason;
      }
      if (reader === 'slow') {
        const ahead = wireBytes / bytesPerMs - ms();
        if (ahead > 1) await sleep(ahead);
      }
      sample();
    }
  } finally {
    clearInterval(timer);
  }
  sample();
  return {
    target: t.key,
    reader,
    answerBytes,
    contentChars,
    wireBytes,
    done,
    finishReason,
    ttfbMs,
    totalMs: ms(),
    rssBeforeKb: before,
    rssPeakKb: peak,
    rssGrowthKb: peak - before,
    backendRssGrowthKb: backendBefore === undefined ? undefined : backendPeak - backendBefore,
  };
}

const mb = (kb: number | undefined) => fmt(kb === undefined ? undefined : kb / 1024, 1);

interface Paced {
  target: TargetKey;
  cps: number;
  kind: 'clean' | 'pii';
  /** From sending the request to the first (last) non-empty content delta, ms. */
  ttftMs: number;
  lastMs: number;
  /** What the client got: the answer (masked where it must be). */
  chars: number;
  placeholder: boolean;
}

/** The characters of a paced answer at `cps`: `pacedSeconds` of generation, at least 200. */
const pacedChars = (cps: number) => Math.max(200, Math.round(cps * settings.pacedSeconds));

/**
 * A streamed chat whose backend generates the answer at a model's pace (model
 * `paced-<chars/s>-<length>-4[-pii]`): when its first and its last token arrive, what a user
 * waits for (the filter's hold-back included).
 */
async function pacedStream(t: Target, cps: number, kind: 'clean' | 'pii'): Promise<Paced> {
  const body = chatBody(true, `paced-${cps}-${pacedChars(cps)}-4${kind === 'pii' ? '-pii' : ''}`);
  const started = process.hrtime.bigint();
  const res = await request(t.url, { method: 'POST', headers, body, headersTimeout: 10000, bodyTimeout: 60000 });
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
  const decoder = new TextDecoder();
  let buffer = '';
  let text = '';
  let ttftMs = Number.NaN;
  let lastMs = Number.NaN;
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      if (!event.startsWith('data: {')) continue;
      const content = (JSON.parse(event.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]
        ?.delta?.content;
      if (!content) continue;
      const at = Number(process.hrtime.bigint() - started) / 1e6;
      if (Number.isNaN(ttftMs)) ttftMs = at;
      lastMs = at;
      text += content;
    }
  }
  return { target: t.key, cps, kind, ttftMs, lastMs, chars: text.length, placeholder: text.includes('[EMAIL]') };
}

/**
 * CPU of a target's process per streamed chunk: an answer of `cpuChunks` deltas of 4 characters
 * sent as fast as the backend goes (model `paced-0-…-4`), the process's CPU ticks over it.
 */
async function cpuPerChunkUs(t: Target): Promise<number> {
  const body = chatBody(true, `paced-0-${settings.cpuChunks * 4}-4`);
  const before = readCpuTicks(t.proc.pid);
  const res = await request(t.url, { method: 'POST', headers, body, headersTimeout: 10000, bodyTimeout: 120000 });
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
  for await (const _ of res.body) {
    // read to the end
  }
  const ticks = readCpuTicks(t.proc.pid) - before;
  return ((ticks / clk) * 1e6) / settings.cpuChunks;
}

async function main(): Promise<number> {
  const perRun = Math.min(settings.warmupMs, 1000) + settings.durationMs + 600;
  const estimate = (perRun * 3 * (settings.connections.length + 1) * settings.rounds + 3 * settings.warmupMs) / 1000;
  console.log(
    `safety-filter bench: ${settings.config}, ${settings.connections.join(', ')} connections + 1 streamed, ` +
      `${settings.durationMs / 1000} s windows, ${settings.rounds} round(s), ~${Math.round(estimate + 30)} s in all`,
  );
  console.log(
    pinned
      ? `load generator on CPU ${settings.loadCpu}, targets and backend on CPU ${settings.targetCpu} (taskset); CLK_TCK ${clk}`
      : 'WARNING: taskset missing or fewer than 2 CPUs: nothing is pinned, figures are less comparable',
  );
  console.log(`request: POST /v1/chat/completions, ${plainBody.length} bytes, model ${settings.model}`);

  const backend = await startNodeServer(
    join(here, 'backend.ts'),
    { CHUNK_SIZE: String(settings.streamChunk) },
    pin(settings.targetCpu),
  );
  const backendBase = `http://127.0.0.1:${backend.port}`;
  const bare = await startNodeServer(
    join(typedDir, 'bare-proxy.ts'),
    { UPSTREAM_URL: `${backendBase}/v1/chat/completions` },
    pin(settings.targetCpu),
  );
  const targets: Target[] = [
    { key: 'direct', url: `${backendBase}/v1/chat/completions`, proc: backend.s },
    { key: 'bare', url: `http://127.0.0.1:${bare.port}/v1/chat/completions`, proc: bare.s, backend: backend.s },
  ];
  const failures: Record<string, string> = {};
  try {
    const filter = await startFilter(backend.port);
    targets.push({
      key: 'filter',
      url: filter.url,
      proc: filter.s,
      backend: backend.s,
      expectHeader: settings.expectHeader || undefined,
    });
  } catch (err) {
    failures.filter = (err as Error).message;
    console.log(`\n${labels.filter}: could not start\n${failures.filter}\n`);
  }
  for (const t of targets) {
    const seen = await check(t.url, t.expectHeader);
    console.log(`${labels[t.key]}: ${t.url} ok ${Object.keys(seen).length ? JSON.stringify(seen) : ''}`);
  }

  const rows: Row[] = [];
  const ttfb: Row[] = [];
  const warmed = new Set<TargetKey>();
  for (let round = 1; round <= settings.rounds; round++) {
    // Interleaved, every other round reversed, so that drift in the machine's load hits all alike.
    const order = round % 2 ? targets : [...targets].reverse();
    for (const connections of [...settings.connections, 0]) {
      for (const t of order) {
        const warmupMs = warmed.has(t.key) ? Math.min(settings.warmupMs, 1000) : settings.warmupMs;
        warmed.add(t.key);
        // Connections 0 stands for the streamed measurement: 1 connection, time to first byte.
        const row = toRow(t, connections || 1, round, await load(t, connections || 1, warmupMs, connections === 0));
        (connections ? rows : ttfb).push(row);
        console.log(
          `  round ${round}, ${connections ? `${String(connections).padStart(2)} conns` : 'streamed'}, ` +
            `${labels[t.key].padEnd(22)} ${fmt(row.rps, 0).padStart(6)} req/s  p50 ${fmt(row.p50Ms, 2).padStart(6)} ms` +
            `  p99 ${fmt(row.p99Ms, 2).padStart(6)} ms  ${fmt(row.cpuUsPerReq, 1).padStart(6)} µs CPU/req` +
            (row.errors ? `  ${row.errors} errors (${row.firstError})` : ''),
        );
      }
    }
  }

  // Medians over the rounds, and the ratios of pairs measured back to back in each round.
  const pick = (list: Row[], key: TargetKey, connections: number, round?: number) =>
    list.filter((r) => r.target === key && r.connections === connections && (round === undefined || r.round === round));
  const median = (list: Row[], f: (r: Row) => number | undefined) => mid(list.map(f));
  /** A table cell: the median of one figure over the rounds. */
  const cell = (list: Row[], f: (r: Row) => number | undefined, digits: number) => fmt(median(list, f), digits);
  const perRound = <T>(f: (round: number) => T | undefined) =>
    Array.from({ length: settings.rounds }, (_, i) => f(i + 1)).filter((x): x is T => x !== undefined);
  const pair = (list: Row[], a: TargetKey, b: TargetKey, connections: number, f: (x: Row, y: Row) => number) =>
    mid(
      perRound((round) => {
        const [x, y] = [pick(list, a, connections, round)[0], pick(list, b, connections, round)[0]];
        // A measurement with errors did not measure the request it claims to: left out.
        return x && y && !x.errors && !y.errors ? f(x, y) : undefined;
      }),
    );

  if (settings.rounds > 0) console.log(`\nnon-streaming chat, medians over ${settings.rounds} round(s):`);
  printTable(
    [
      'target',
      'conns',
      'req/s',
      'p50 ms',
      'p99 ms',
      'CPU µs/req',
      'backend µs/req',
      'loadgen CPU',
      'core other',
      'errors',
    ],
    (settings.rounds ? settings.connections : []).flatMap((c) =>
      targets.map((t) => {
        const mine = pick(rows, t.key, c);
        return [
          labels[t.key],
          String(c),
          cell(mine, (r) => r.rps, 0),
          cell(mine, (r) => r.p50Ms, 2),
          cell(mine, (r) => r.p99Ms, 2),
          cell(mine, (r) => r.cpuUsPerReq, 1),
          cell(mine, (r) => r.backendUsPerReq, 1),
          `${fmt((median(mine, (r) => r.loadgenCpu) ?? Number.NaN) * 100, 0)}%`,
          `${fmt((median(mine, (r) => r.coreOthers) ?? Number.NaN) * 100, 0)}%`,
          String(mine.reduce((s, r) => s + r.errors, 0)),
        ];
      }),
    ),
  );

  const loaded = settings.connections.includes(32) ? 32 : Math.max(...settings.connections);
  const single = Math.min(...settings.connections);
  const has = targets.some((t) => t.key === 'filter');
  const ratios = {
    connections: { loaded, single },
    cpuRatio: pair(rows, 'filter', 'bare', loaded, (x, y) => x.cpuUsPerReq / y.cpuUsPerReq),
    rpsRatio: pair(rows, 'filter', 'bare', loaded, (x, y) => x.rps / y.rps),
    addedP50Ms: pair(rows, 'filter', 'direct', single, (x, y) => x.p50Ms - y.p50Ms),
    addedP99Ms: pair(rows, 'filter', 'direct', single, (x, y) => x.p99Ms - y.p99Ms),
    bareAddedP50Ms: pair(rows, 'bare', 'direct', single, (x, y) => x.p50Ms - y.p50Ms),
    bareAddedP99Ms: pair(rows, 'bare', 'direct', single, (x, y) => x.p99Ms - y.p99Ms),
    ttfbOverheadP50Ms: pair(ttfb, 'filter', 'direct', 1, (x, y) => x.p50Ms - y.p50Ms),
    ttfbOverheadP99Ms: pair(ttfb, 'filter', 'direct', 1, (x, y) => x.p99Ms - y.p99Ms),
  };
  const ok = (v: number | undefined, pass: (v: number) => boolean) => (v === undefined ? undefined : pass(v));
  const verdicts = {
    cpu: ok(ratios.cpuRatio, (v) => v <= goals.cpuRatio),
    rps: ok(ratios.rpsRatio, (v) => v >= goals.rpsRatio),
    p50: ok(ratios.addedP50Ms, (v) => v < goals.addedP50Ms),
    p99: ok(ratios.addedP99Ms, (v) => v < goals.addedP99Ms),
    ttfb: ok(ratios.ttfbOverheadP50Ms, (v) => v < goals.ttfbOverheadMs),
  };

  if (settings.rounds > 0) {
    console.log('\nstreamed chat (stream: true), time to first byte of the body, 1 connection, medians:');
  }
  printTable(
    ['target', 'streams/s', 'TTFB p50 ms', 'TTFB p99 ms', 'CPU µs/stream', 'errors'],
    (settings.rounds ? targets : []).map((t) => {
      const mine = pick(ttfb, t.key, 1);
      return [
        labels[t.key],
        cell(mine, (r) => r.rps, 0),
        cell(mine, (r) => r.p50Ms, 3),
        cell(mine, (r) => r.p99Ms, 3),
        cell(mine, (r) => r.cpuUsPerReq, 1),
        String(mine.reduce((s, r) => s + r.errors, 0)),
      ];
    }),
  );

  // Memory: a huge answer through each proxy, read fast and then slowly, a few times each: a
  // single stream's RSS peak also depends on when V8 collects garbage and resizes its young
  // generation (the backend, which never holds the answer, grows by as much); holding the answer
  // shows every time. Then an answer `streamScale` times larger: GC growth stays the same size,
  // holding it would grow with it, which is what tells the two apart.
  const answerBytes = Math.round(settings.streamMb * 1024 * 1024);
  const bigBytes = Math.round(answerBytes * settings.streamScale);
  const sizes = [
    { bytes: answerBytes, repeat: settings.streamRepeat },
    { bytes: bigBytes, repeat: settings.bigRepeat },
  ].filter((x) => x.repeat > 0);
  const streams: StreamResult[] = [];
  console.log(
    `\nstreaming a ${settings.streamMb} MiB answer ${settings.streamRepeat} times per reader, then a ` +
      `${fmt(bigBytes / 1024 / 1024, 0)} MiB one ${settings.bigRepeat} times (${settings.streamChunk} characters per delta); ` +
      `RSS sampled every ~5 ms; slow reader: ${settings.slowReaderMbps} MB/s:`,
  );
  for (const t of targets.filter((x) => x.key !== 'direct')) {
    try {
      // A first stream of the same size, not reported: it warms the path up and lets V8 grow its
      // young generation to its working size, which would otherwise read as growth.
      await streamThrough(t, answerBytes, 'fast');
      for (const { bytes, repeat } of sizes) {
        for (const reader of ['fast', 'slow'] as const) {
          for (let i = 0; i < repeat; i++) streams.push(await streamThrough(t, bytes, reader));
        }
      }
    } catch (err) {
      failures[`stream-${t.key}`] = (err as Error).message;
      console.log(`${labels[t.key]}: stream failed: ${(err as Error).message}`);
    }
  }
  // Time to first and last token with the answer generated at a model's pace: what the hold-back costs.
  const paced: Paced[] = [];
  const pacedTargets = targets.filter((t) => t.key !== 'bare');
  if (settings.ttftRepeat > 0) {
    console.log(
      `\npaced streams (deltas of 4 characters, ${settings.ttftRepeat} per cell, ~${settings.pacedSeconds} s of generation each):`,
    );
  }
  for (const cps of settings.ttftRepeat > 0 ? settings.pacedCps : []) {
    for (const kind of ['clean', 'pii'] as const) {
      for (let i = 0; i < settings.ttftRepeat; i++) {
        for (const t of i % 2 ? [...pacedTargets].reverse() : pacedTargets) {
          try {
            paced.push(await pacedStream(t, cps, kind));
          } catch (err) {
            failures[`paced-${t.key}-${cps}-${kind}`] = (err as Error).message;
          }
        }
      }
    }
  }
  const pacedOf = (key: TargetKey, cps: number, kind: string) =>
    paced.filter((p) => p.target === key && p.cps === cps && p.kind === kind);
  const addedTtft = (cps: number, kind: string) =>
    (mid(pacedOf('filter', cps, kind).map((p) => p.ttftMs)) ?? Number.NaN) -
    (mid(pacedOf('direct', cps, kind).map((p) => p.ttftMs)) ?? Number.NaN);
  printTable(
    [
      'chars/s',
      'text',
      'answer chars',
      '(a) TTFT p50 ms',
      '(c) TTFT p50 ms',
      'added',
      '(a) last token ms',
      '(c) last token ms',
      'added',
      'masked',
    ],
    settings.ttftRepeat > 0
      ? settings.pacedCps.flatMap((cps) =>
          (['clean', 'pii'] as const).map((kind) => {
            const [a, c] = [pacedOf('direct', cps, kind), pacedOf('filter', cps, kind)];
            const last = (list: Paced[]) => mid(list.map((p) => p.lastMs));
            return [
              String(cps),
              kind,
              String(pacedChars(cps)),
              fmt(mid(a.map((p) => p.ttftMs)), 1),
              fmt(mid(c.map((p) => p.ttftMs)), 1),
              signed(addedTtft(cps, kind)),
              fmt(last(a), 0),
              fmt(last(c), 0),
              signed((last(c) ?? Number.NaN) - (last(a) ?? Number.NaN)),
              kind === 'pii' ? `${c.filter((p) => p.placeholder).length}/${c.length}` : '',
            ];
          }),
        )
      : [],
  );
  const ttftGoalCps = settings.pacedCps.filter((c) => c === 200 || c === 800);
  const ttftVerdict = ttftGoalCps.length
    ? ttftGoalCps.every((cps) => addedTtft(cps, 'clean') < goals.addedTtftMs)
    : undefined;

  // CPU per streamed chunk, through the filter, the bare proxy and (if given) a baseline checkout.
  const chunkCpu: Record<string, number> = {};
  let baseline: { s: Started; url: string } | undefined;
  if (settings.cpuChunks > 0) {
    if (settings.baseline) {
      try {
        baseline = await startFilter(backend.port, resolve(settings.baseline), 'baseline-filter');
      } catch (err) {
        failures.baseline = (err as Error).message;
      }
    }
    const measured: Array<[string, Target]> = targets
      .filter((t) => t.key !== 'direct')
      .map((t): [string, Target] => [t.key, t]);
    if (baseline) measured.push(['baseline', { key: 'filter', url: baseline.url, proc: baseline.s }]);
    const samples: Record<string, number[]> = {};
    for (let round = 0; round < 3; round++) {
      for (const [name, t] of round % 2 ? [...measured].reverse() : measured) {
        try {
          samples[name] ??= [];
          samples[name].push(await cpuPerChunkUs(t));
        } catch (err) {
          failures[`chunk-cpu-${name}`] = (err as Error).message;
        }
      }
    }
    for (const [name, list] of Object.entries(samples)) chunkCpu[name] = mid(list) ?? Number.NaN;
    console.log(
      `\nCPU per streamed chunk (${settings.cpuChunks} deltas of 4 characters, median of 3): ` +
        Object.entries(chunkCpu)
          .map(([name, us]) => `${name} ${fmt(us, 2)} µs`)
          .join(', ') +
        (chunkCpu.baseline ? `; filter / baseline ${fmt(chunkCpu.filter / chunkCpu.baseline, 2)}x` : ''),
    );
  }
  const chunkCpuVerdict = chunkCpu.baseline ? chunkCpu.filter / chunkCpu.baseline <= goals.chunkCpuRatio : undefined;
  baseline?.s.child.kill();

  const streamGroups = targets.flatMap((t) =>
    sizes.flatMap(({ bytes }) =>
      (['fast', 'slow'] as const)
        .map((reader) => ({
          target: t.key,
          reader,
          bytes,
          list: streams.filter((s) => s.target === t.key && s.reader === reader && s.answerBytes === bytes),
        }))
        .filter((g) => g.list.length > 0),
    ),
  );
  const growthOf = (list: StreamResult[]) => mid(list.map((s) => s.rssGrowthKb));
  printTable(
    [
      'target',
      'answer MiB',
      'reader',
      'complete',
      'TTFB ms',
      'total ms',
      'RSS before MB',
      'growth MB, median (min-max)',
      'backend growth MB',
    ],
    streamGroups.map(({ target, reader, bytes, list }) => {
      const broken = list.find((s) => !s.done || s.contentChars !== s.answerBytes);
      return [
        labels[target],
        fmt(bytes / 1024 / 1024, 0),
        reader,
        broken
          ? `no (${broken.contentChars} chars, finish ${broken.finishReason ?? '-'}${broken.done ? ', [DONE]' : ''})`
          : `${list.length}/${list.length}`,
        fmt(mid(list.map((s) => s.ttfbMs)), 1),
        fmt(mid(list.map((s) => s.totalMs)), 0),
        mb(mid(list.map((s) => s.rssBeforeKb))),
        `${mb(growthOf(list))} (${mb(Math.min(...list.map((s) => s.rssGrowthKb)))}-${mb(Math.max(...list.map((s) => s.rssGrowthKb)))})`,
        mb(mid(list.map((s) => s.backendRssGrowthKb))),
      ];
    }),
  );
  // Per size, judged on the least growth of the repeats (of the worse reader): holding the answer
  // shows in every stream; a collector that runs late only in some.
  const worstGrowthKb = (bytes: number) => {
    const groups = streamGroups.filter((g) => g.target === 'filter' && g.bytes === bytes);
    return groups.length ? Math.max(...groups.map((g) => Math.min(...g.list.map((s) => s.rssGrowthKb)))) : undefined;
  };
  const rss = sizes.map(({ bytes, repeat }) => {
    const kb = worstGrowthKb(bytes);
    return { bytes, repeat, kb, pass: ok(kb, (v) => v * 1024 < goals.rssGrowthShare * bytes) };
  });
  // The verdict is the largest answer's: there GC growth is small beside what holding would add.
  const rssVerdict = rss.at(-1)?.pass;

  console.log('\ntargets, (c) safety filter:');
  printTable(
    ['figure', 'against', 'target', 'measured'],
    [
      [
        `CPU/request, ${loaded} conns`,
        '(b)',
        `<= ${goals.cpuRatio}x`,
        `${fmt(ratios.cpuRatio, 2)}x${verdict(verdicts.cpu)}`,
      ],
      [
        `throughput, ${loaded} conns`,
        '(b)',
        `>= ${goals.rpsRatio}x`,
        `${fmt(ratios.rpsRatio, 2)}x${verdict(verdicts.rps)}`,
      ],
      [
        `added p50, ${single} conn`,
        '(a)',
        `< ${goals.addedP50Ms} ms`,
        `${signed(ratios.addedP50Ms)} ms${verdict(verdicts.p50)}`,
      ],
      [
        `added p99, ${single} conn`,
        '(a)',
        `< ${goals.addedP99Ms} ms`,
        `${signed(ratios.addedP99Ms)} ms${verdict(verdicts.p99)}`,
      ],
      [
        'TTFB overhead, p50 (p99)',
        '(a)',
        `< ${goals.ttfbOverheadMs} ms`,
        `${signed(ratios.ttfbOverheadP50Ms)} ms (${signed(ratios.ttfbOverheadP99Ms)})${verdict(verdicts.ttfb)}`,
      ],
      ...rss.map(({ bytes, repeat, kb, pass }) => [
        `RSS growth (least of ${repeat}), ${fmt(bytes / 1024 / 1024, 0)} MiB stream`,
        '',
        `< ${mb((goals.rssGrowthShare * bytes) / 1024)} MB`,
        `${mb(kb)} MB${bytes === rss.at(-1)?.bytes ? verdict(pass) : ' (GC alone moves it by up to ~10 MB)'}`,
      ]),
      ...ttftGoalCps.map((cps) => [
        `added TTFT p50, clean text at ${cps} chars/s`,
        '(a)',
        `< ${goals.addedTtftMs} ms`,
        `${signed(addedTtft(cps, 'clean'))} ms${verdict(addedTtft(cps, 'clean') < goals.addedTtftMs)}`,
      ]),
      [
        'CPU per streamed chunk',
        '(c0) baseline',
        `<= ${goals.chunkCpuRatio}x`,
        chunkCpu.baseline
          ? `${fmt(chunkCpu.filter / chunkCpu.baseline, 2)}x${verdict(chunkCpuVerdict)}`
          : 'no baseline (BENCH_SAFETY_BASELINE)',
      ],
      [
        `for reference: (b) added p50 / p99, ${single} conn`,
        '(a)',
        '',
        `${signed(ratios.bareAddedP50Ms)} / ${signed(ratios.bareAddedP99Ms)} ms`,
      ],
    ],
  );
  if (!has) console.log('(c) did not run: no ratios');
  const failed = [...rows, ...ttfb].filter((r) => r.errors > 0);
  for (const r of failed) {
    failures[`${r.target}@${r.connections}/${r.round}`] = `${r.errors} errors, first: ${r.firstError}`;
  }
  if (failed.length) {
    console.log(
      `\n${failed.length} measurement(s) had errors and are left out of the ratios ` +
        `(first: ${labels[failed[0].target]}, ${failed[0].firstError})`,
    );
  }
  const saturated = settings.connections.flatMap((c) =>
    targets.filter((t) => (median(pick(rows, t.key, c), (r) => r.loadgenCpu) ?? 0) > 0.9).map((t) => `${t.key}@${c}`),
  );
  if (saturated.length) {
    console.log(
      `\nnote: the load generator used >90% of its core for ${saturated.join(', ')}: there the throughput is its limit.`,
    );
  }

  const noisy = [...rows, ...ttfb].filter((r) => (r.coreOthers ?? 0) > 0.25);
  if (noisy.length) {
    console.log(
      `\nnote: other processes (or interrupts) took more than 25% of the target core in ${noisy.length} of ` +
        `${rows.length + ttfb.length} measurements: the machine was busy, figures are noisy.`,
    );
  }

  writeResults(join(root, 'bench', 'results', `safety-filter-${stamp}.json`), {
    date: new Date().toISOString(),
    machine: machine(pinned),
    settings: { ...settings, apiKey: undefined },
    clockTicks: clk,
    goals,
    ratios,
    verdicts: { ...verdicts, rss: rssVerdict, ttft: ttftVerdict, chunkCpu: chunkCpuVerdict },
    rss,
    rows,
    ttfb,
    streams,
    paced,
    chunkCpu,
    failures,
  });
  return Object.keys(failures).length ? 1 : 0;
}

await runBench(main, { logDir, keepLogs: settings.keepLogs });
