/**
 * `npm run bench:instructions`: what a request costs in CPU instructions, which the machine's load
 * does not change. The typed proxy (configs/typed-proxy.yaml) and the safety filter
 * (configs/safety-filter.yaml), each started from its shipped config exactly as `npm run bench`
 * starts it (bench/services/cases.ts), and the Koa + undici floor in front of the same upstream,
 * each run under `valgrind --tool=callgrind`. The upstreams and the client run natively, outside
 * valgrind. For each target: a warm-up (the JIT settles), then N requests, then 2N, the counters
 * dumped between the phases (callgrind_control); instructions per request = (I(2N) − I(N)) / N,
 * which cancels what the process spends whatever the requests (timers, the dumps themselves).
 * V8 runs single-threaded (v8Flags), so that everything is counted on the main thread. Each figure
 * is also given without the JIT compiler (TurboFan still compiles thousands of requests in and
 * dominates the dumps unevenly): the figure the phases agree on (compilerInstructions).
 * Ratios are to the floor of the same family measured in the same run. See bench/README.md.
 *
 * Env: INSTR_ROUTES (keys, default typed-proxy/jsonrpc,typed-proxy/send,safety-filter/chat),
 * INSTR_N (200), INSTR_WARMUP (1500 requests: the JIT still compiles after 300 under valgrind), INSTR_CONNECTIONS (4), INSTR_ANNOTATE (rows of
 * callgrind_annotate to print per target, 0 = none; default 0), BENCH_RUN (dist|source),
 * BENCH_HISTORY=1 (append the figures to bench/history/), BENCH_KEEP_LOGS=1, BENCH_BUILD=0 (dist/ as it
 * is), BENCH_BASELINE (another checkout, built: its services too, as `<route>@base`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { bundleForNode, envNum, runBench, startNodeServer, waitUntilReady } from '../common/harness.ts';
import { markdownTable } from '../common/markdown-table.ts';
import type { Target } from '../common/measure.ts';
import { fmt, gitCommit, machine, printTable, writeResults } from '../common/report.ts';
import {
  type Context,
  chatRequest,
  type Family,
  SERVICES,
  toolsCall,
  toolsCallHeaders,
  verify,
} from './../services/cases.ts';
import { type Started, start, waitForLine } from '../typed-proxy/children.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const settings = {
  routes: (process.env.INSTR_ROUTES ?? 'typed-proxy/jsonrpc,typed-proxy/send,safety-filter/chat')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean),
  n: Math.floor(envNum('INSTR_N', 200)),
  warmup: Math.floor(envNum('INSTR_WARMUP', 1500)),
  connections: Math.floor(envNum('INSTR_CONNECTIONS', 4)),
  annotate: Math.floor(Number(process.env.INSTR_ANNOTATE ?? 0)) || 0,
  run: (process.env.BENCH_RUN === 'source' ? 'source' : 'dist') as 'dist' | 'source',
  history: process.env.BENCH_HISTORY === '1',
  keepLogs: process.env.BENCH_KEEP_LOGS === '1',
  startTimeoutMs: envNum('BENCH_START_TIMEOUT', 900) * 1000,
  /** Another checkout (with node_modules and dist/): its services join as `<route>@base`. */
  baseline: process.env.BENCH_BASELINE,
};
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
/**
 * V8 without helper threads (`--single-threaded`): the optimising compiler's jobs and the garbage
 * collector's marking run on the main thread, when they are due, and are counted there. With the
 * helper threads, callgrind (which runs one thread at a time) let a compile job finish in one phase
 * or the other: the same checkout measured 2962k and 1174k per request for tools/call in two runs,
 * and even the main thread's figure moved by ~25% (the floor 323k, 322k, 256k). Passed to every
 * process measured (the services and the floor). NODE_FLAGS replaces the default ('' = none).
 */
const v8Flags = (process.env.NODE_FLAGS ?? '--single-threaded').split(' ').filter(Boolean);
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-instr-'));
const outDir = join(root, 'bench', 'results', `instructions-${stamp}`);

/** valgrind's argv for a process named `name`: its callgrind counters go to outDir/<name>.out(.1, .2, ...). */
const callgrind = (name: string) => [
  'valgrind',
  '--tool=callgrind',
  `--callgrind-out-file=${join(outDir, `${name.replace(/[^\w.@-]/g, '_')}.out`)}`,
  '--trace-children=no',
  '--vgdb=yes',
  // Not instrumented until the measurement starts (callgrind_control --instr=on): a start under
  // full instrumentation took 10-15 minutes on a loaded machine.
  '--instr-atstart=no',
];

interface Measured extends Target {
  label: string;
  family: Family;
  /** The file name of its callgrind output (without the dump number). */
  out: string;
  floor?: boolean;
}

/** Sends `count` requests, `connections` at a time; throws on the first answer that is not 2xx. */
async function send(pool: Pool, t: Measured, count: number, connections: number): Promise<void> {
  const url = new URL(t.url);
  let left = count;
  const worker = async () => {
    while (left > 0) {
      left--;
      const res = await pool.request({
        path: url.pathname + url.search,
        method: (t.method ?? 'POST') as 'POST',
        headers: t.headers,
        body: t.body,
        headersTimeout: 120_000,
        bodyTimeout: 120_000,
      });
      const text = await res.body.text();
      if (res.statusCode < 200 || res.statusCode > 299)
        throw new Error(`${t.label}: ${res.statusCode}: ${text.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
}

/** Dumps the process's callgrind counters (and zeroes them); resolves with the instructions of the dump. */
async function dump(pid: number, out: string): Promise<number> {
  const before = new Set(dumps(out));
  const r = spawnSync('callgrind_control', ['--dump', String(pid)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`callgrind_control --dump ${pid}: ${r.stderr || r.stdout}`);
  for (let i = 0; i < 600; i++) {
    const fresh = dumps(out).filter((f) => !before.has(f));
    if (fresh.length) {
      const text = readFileSync(fresh[0], 'utf8');
      const m = /^totals:\s*(\d+)/m.exec(text) ?? /^summary:\s*(\d+)/m.exec(text);
      if (m) return Number(m[1]);
    }
    await sleep(100);
  }
  throw new Error(`no callgrind dump appeared for ${out}`);
}

const dumps = (out: string) =>
  readdirSync(outDir)
    .filter((f) => f.startsWith(`${out}.out.`))
    .map((f) => join(outDir, f));

/** The top rows of callgrind_annotate for a dump (function level, inclusive off). */
function annotate(file: string, rows: number): string[] {
  const r = spawnSync('callgrind_annotate', ['--threshold=99', file], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) return [`callgrind_annotate failed: ${r.stderr}`];
  const lines = r.stdout.split('\n');
  const at = lines.findIndex((l) => /file:function/.test(l));
  return lines
    .slice(at + 2)
    .filter((l) => l.trim())
    .slice(0, rows);
}

/**
 * The instructions of a dump that went to V8's compilers (inclusive): `Runtime_Compile*` (TurboFan
 * jobs run on the main thread under `--single-threaded`, lazy and baseline compiles), and whatever
 * ran on V8's helper threads (node's PlatformWorkerThread: compile jobs and concurrent GC, when
 * NODE_FLAGS brings them back). The JIT still compiles thousands of requests in, unevenly between
 * the phases (the Koa floor after a 1500-request warm-up: 208M instructions of TurboFan in the N
 * phase, 143M in the 2N phase, against ~75M and ~140M of everything else): the rest (the requests'
 * JavaScript as compiled, parsers, system call wrappers, garbage collection) is what the phases
 * agree on.
 */
function compilerInstructions(file: string): number {
  const r = spawnSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  if (r.status !== 0) return Number.NaN;
  let sum = 0;
  for (const line of r.stdout.split('\n')) {
    if (!/PlatformWorkerThread\(|v8::internal::Runtime_Compile\w*\(/.test(line)) continue;
    const m = /^\s*([\d,]+)/.exec(line);
    if (m) sum += Number(m[1].replaceAll(',', ''));
  }
  return sum;
}

/** A bench server as one plain JavaScript file, so that the floor starts under valgrind without tsx. */
function bundled(file: string): Promise<string> {
  return bundleForNode(file, `instr-${file.split('/').pop()!.replace(/\.ts$/, '')}`);
}

interface Figures {
  key: string;
  label: string;
  family: Family;
  floor: boolean;
  /** Instructions per request of the N phase and of the 2N phase, each over its own requests. */
  perRequestN: number;
  perRequest2N: number;
  /** (I(2N) − I(N)) / N. */
  perRequest: number;
  /** The same without the JIT compiler (compilerInstructions): read this one. */
  perRequestRun: number;
  /** Without the compiler, per request of the N phase and of the 2N phase (they should agree). */
  perRequestRunN: number;
  perRequestRun2N: number;
  /** The compiler's share of the N and 2N dumps together. */
  compilerShare: number;
  hot?: string[];
}

async function main(): Promise<number> {
  if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('valgrind is not installed');
  mkdirSync(outDir, { recursive: true });
  if (settings.run === 'dist' && process.env.BENCH_BUILD !== '0') {
    console.log('building dist/ (npm run build): the services run the compiled build, as shipped');
    execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'ignore' });
  }
  const wanted = (service: string) => settings.routes.some((r) => r.startsWith(`${service}/`));
  const echo = await startNodeServer(join(root, 'bench/typed-proxy/upstream.ts'), {}, undefined);
  const echoUrl = `http://127.0.0.1:${echo.port}/`;
  let backendUrl: string | undefined;
  if (wanted('safety-filter')) {
    const backend = await startNodeServer(join(root, 'bench/safety-filter/backend.ts'), {}, undefined);
    backendUrl = `http://127.0.0.1:${backend.port}/v1`;
  }

  // The floor's family of each route (the typed proxy's are JSON-RPC; the filter's are chat).
  const familyOf = (key: string): Family =>
    key.startsWith('safety-filter/') ? (key.endsWith('chat-stream') ? 'chat-stream' : 'chat') : 'jsonrpc';
  const families = new Set<Family>(settings.routes.map(familyOf));
  const context: Context = {
    dir: root,
    run: settings.run,
    logDir,
    nodeFlags: () => v8Flags,
    wrap: callgrind,
    suffix: '',
    echoUrl,
    backendUrl,
    typedSet: [],
    // Under valgrind on a loaded machine a request's headers took longer than the shipped 10 s to be
    // read (408 in the middle of a warm-up): the services' header and body timeouts are raised.
    sets: ['limits.header_timeout_ms=600000', 'limits.body_idle_timeout_ms=600000'],
    readyTimeoutMs: settings.startTimeoutMs,
  };
  // Everything starts at once (a start under callgrind takes minutes); measured one at a time.
  const contexts = [context];
  if (settings.baseline) contexts.push({ ...context, dir: settings.baseline, suffix: '@base' });
  const services = contexts.flatMap((c) =>
    SERVICES.filter((s) => wanted(s.name)).map(async (service): Promise<Measured[]> => {
      const t0 = Date.now();
      console.log(`${service.name}${c.suffix}: starting under valgrind`);
      const out: Measured[] = [];
      for (const s of await service.start(c)) {
        if (settings.routes.includes(s.key.replace(/@base$/, '')))
          out.push({ ...s, label: s.label, family: s.family, out: service.name + c.suffix });
      }
      console.log(`${service.name}${c.suffix}: ready in ${fmt((Date.now() - t0) / 1000, 0)} s`);
      return out;
    }),
  );

  // The Koa + undici floor (bench/typed-proxy/bare-proxy.ts, BARE_BUFFER=1) per family, under callgrind too.
  const floorUpstream: Record<Family, string | undefined> = {
    jsonrpc: echoUrl,
    chat: backendUrl && `${backendUrl}/chat/completions`,
    'chat-stream': backendUrl && `${backendUrl}/chat/completions`,
  };
  const floorRequest: Record<Family, Pick<Target, 'body' | 'headers'>> = {
    jsonrpc: { body: toolsCall, headers: toolsCallHeaders },
    chat: { body: chatRequest(false), headers: { 'content-type': 'application/json', accept: 'application/json' } },
    'chat-stream': {
      body: chatRequest(true),
      headers: { 'content-type': 'application/json', accept: 'application/json' },
    },
  };
  const floorFile = await bundled(join(root, 'bench/typed-proxy/bare-proxy.ts'));
  const floors = [...families].map(async (family): Promise<Measured> => {
    const up = new URL(floorUpstream[family]!);
    const name = `floor-koa-${family}`;
    const s: Started = start('valgrind', [...callgrind(name).slice(1), process.execPath, ...v8Flags, floorFile], {
      cwd: root,
      env: { ...process.env, UPSTREAM_URL: up.href, BARE_BUFFER: '1', PORT: '0' },
    });
    const m = await waitForLine(s, /listening (\d+)/, settings.startTimeoutMs);
    s.child.stdout?.resume();
    const t: Measured = {
      key: `floor-koa/${family}`,
      label: `floor: Koa + undici, buffers (${family})`,
      family,
      floor: true,
      url: `http://127.0.0.1:${m[1]}${up.pathname}`,
      proc: s,
      out: name,
      ...floorRequest[family],
    };
    await waitUntilReady(s, t.label, settings.startTimeoutMs, () => verify(t));
    return t;
  });
  const targets: Measured[] = [...(await Promise.all(floors)), ...(await Promise.all(services)).flat()];

  const instrumented = new Set<number>();
  const figures: Figures[] = [];
  for (const t of targets) {
    const pool = new Pool(new URL(t.url).origin, { connections: settings.connections });
    try {
      if (!instrumented.has(t.proc.pid)) {
        instrumented.add(t.proc.pid);
        const r = spawnSync('callgrind_control', ['--instr=on', String(t.proc.pid)], { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`callgrind_control --instr=on: ${r.stderr || r.stdout}`);
      }
      process.stdout.write(`${t.label}: warm-up ${settings.warmup}`);
      await send(pool, t, settings.warmup, settings.connections);
      await dump(t.proc.pid, t.out);
      process.stdout.write(`, N = ${settings.n}`);
      await send(pool, t, settings.n, settings.connections);
      const filesN = dumps(t.out);
      const iN = await dump(t.proc.pid, t.out);
      const lastN = dumps(t.out).filter((f) => !filesN.includes(f))[0];
      process.stdout.write(`, 2N`);
      await send(pool, t, 2 * settings.n, settings.connections);
      const files = dumps(t.out);
      const i2N = await dump(t.proc.pid, t.out);
      const last = dumps(t.out).filter((f) => !files.includes(f))[0];
      const compiledN = lastN ? compilerInstructions(lastN) : Number.NaN;
      const compiled2N = last ? compilerInstructions(last) : Number.NaN;
      const f: Figures = {
        key: t.key,
        label: t.label,
        family: t.family,
        floor: !!t.floor,
        perRequestN: iN / settings.n,
        perRequest2N: i2N / (2 * settings.n),
        perRequest: (i2N - iN) / settings.n,
        perRequestRun: (i2N - compiled2N - (iN - compiledN)) / settings.n,
        perRequestRunN: (iN - compiledN) / settings.n,
        perRequestRun2N: (i2N - compiled2N) / (2 * settings.n),
        compilerShare: (compiledN + compiled2N) / (iN + i2N),
        hot: settings.annotate && last ? annotate(last, settings.annotate) : undefined,
      };
      figures.push(f);
      console.log(
        `: ${fmt(f.perRequest / 1000, 0)} k instructions/request, ${fmt(f.perRequestRun / 1000, 0)} k without the JIT compiler ` +
          `(the compiler: ${fmt(100 * f.compilerShare, 0)}% of the dumps; without it ${fmt(f.perRequestRunN / 1000, 0)} k / ` +
          `${fmt(f.perRequestRun2N / 1000, 0)} k per request of the N / 2N phases)`,
      );
      if (f.hot) for (const l of f.hot) console.log(`    ${l}`);
    } finally {
      await pool.close();
    }
  }

  const floorOf = (family: Family) => figures.find((f) => f.floor && f.family === family);
  console.log(
    `\ninstructions per request under callgrind (the gateway process, V8 single-threaded: everything, then without the JIT compiler), N = ${settings.n}, ` +
      `${settings.connections} connections; ratio to the Koa + undici floor of the same run`,
  );
  const rows = figures.map((f) => {
    const floor = floorOf(f.family);
    const r = floor && !f.floor ? f.perRequest / floor.perRequest : undefined;
    const rRun = floor && !f.floor ? f.perRequestRun / floor.perRequestRun : undefined;
    return { ...f, ratio: r, ratioRun: rRun };
  });
  const ratioText = (x: number | undefined) => (x === undefined ? '-' : `${fmt(x, 2)}×`);
  // One table, printed and (BENCH_HISTORY=1) appended to the history.
  const header = [
    'target',
    'k instr/req',
    'N phase',
    '2N phase',
    'ratio to floor',
    'k without compiler',
    'N / 2N phase',
    'compiler',
    'ratio without compiler',
  ];
  const cells = rows.map((r) => [
    r.label,
    fmt(r.perRequest / 1000, 0),
    fmt(r.perRequestN / 1000, 0),
    fmt(r.perRequest2N / 1000, 0),
    ratioText(r.ratio),
    fmt(r.perRequestRun / 1000, 0),
    `${fmt(r.perRequestRunN / 1000, 0)} / ${fmt(r.perRequestRun2N / 1000, 0)}`,
    `${fmt(100 * r.compilerShare, 0)}%`,
    ratioText(r.ratioRun),
  ]);
  printTable(header, cells);
  const commit = gitCommit();
  const result = {
    date: new Date().toISOString(),
    commit,
    machine: machine(false),
    settings,
    nodeFlags: v8Flags,
    valgrind: spawnSync('valgrind', ['--version'], { encoding: 'utf8' }).stdout.trim(),
    rows,
  };
  writeResults(join(root, 'bench', 'results', `instructions-${stamp}.json`), result);
  console.log(`callgrind dumps: ${outDir}`);
  if (settings.history) {
    const dir = join(root, 'bench', 'history');
    writeResults(join(dir, `${result.date.slice(0, 10)}-${commit}-instructions.json`), result);
    const table = [
      `\n### ${result.date.slice(0, 16).replace('T', ' ')} UTC, ${commit}: instructions per request (npm run bench:instructions)\n`,
      `callgrind, V8 ${v8Flags.join(' ') || 'with its helper threads'}, N = ${settings.n}, ${settings.connections} connections; ratio to the Koa + undici floor of the same run\n`,
      ...markdownTable(
        header,
        header.map((_, i) => (i === 0 ? 'left' : 'right')),
        cells,
      ),
      '',
    ];
    if (!existsSync(join(dir, 'README.md'))) throw new Error('bench/history/README.md is missing');
    appendFileSync(join(dir, 'README.md'), table.join('\n'));
  }
  return 0;
}

await runBench(main, { logDir, keepLogs: settings.keepLogs });
