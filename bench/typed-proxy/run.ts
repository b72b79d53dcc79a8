/**
 * `npm run bench`: the typed proxy's strict pipeline on `POST /` against (a) the upstream called
 * directly and (b) a bare Koa + undici proxy, in one run. The load generator runs on one core,
 * the targets and the upstream on the other (taskset). Prints a table, the ratios and PASS/MISS
 * against the issue's targets; writes the figures to bench/results/typed-proxy-<timestamp>.json.
 * A miss never fails the run: benchmarks are informational. See bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parse as parseYaml, stringify } from 'yaml';
import { envNum, runBench, startNodeServer } from '../common/harness.ts';
import {
  type Row as CommonRow,
  type Target as CommonTarget,
  measure,
  medianRow,
  roundOrder,
} from '../common/measure.ts';
import { fmt, machine, mid, printTable, signed, verdict, writeResults } from '../common/report.ts';
import { startService } from '../common/switchyard.ts';
import { freePort, hasTaskset, type Started, stop } from './children.ts';
import { clockTicks } from './proc.ts';
import { analyseProfile, type ProfileReport } from './profile.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));

const settings = {
  warmupMs: envNum('BENCH_WARMUP', 2) * 1000,
  durationMs: envNum('BENCH_DURATION', 4) * 1000,
  connections: (process.env.BENCH_CONNECTIONS ?? '32,1').split(',').map((c) => Math.max(1, Number(c) || 1)),
  rounds: Math.floor(envNum('BENCH_ROUNDS', 3)),
  loadCpu: process.env.BENCH_LOAD_CPU ?? '0',
  targetCpu: process.env.BENCH_TARGET_CPU ?? '1',
  /** Also measure the typed proxy with its access log on (LOG_LEVEL=info). */
  accessLog: (process.env.BENCH_ACCESS_LOG ?? '1') !== '0',
  keepLogs: process.env.BENCH_KEEP_LOGS === '1',
  /** Extra `--set` overrides for the typed proxy, `;`-separated (e.g. `mode=permissive`). */
  /** CPU-profile (b) and (c) and print where their time goes (the profiler inflates every figure). */
  profile: process.env.BENCH_PROFILE === '1',
  /** How many of the profile's hottest functions are printed. */
  profileRows: Math.floor(envNum('BENCH_PROFILE_ROWS', 25)),
  typedSet: (process.env.BENCH_TYPED_SET ?? '')
    .split(';')
    .map((x) => x.trim())
    .filter(Boolean),
  /** Another checkout of the repository (with node_modules): its typed proxy joins as (c0), for an A/B of a change. */
  baseline: process.env.BENCH_BASELINE,
  /**
   * What the typed proxy runs: `dist`, the compiled build a production install runs (built first,
   * `npm run build`), or `source`, the TypeScript through tsx as in development. tsx's transform
   * names every function it creates (esbuild keepNames), a cost per closure made per request that
   * the shipped build does not pay: measured 210 vs 155 µs CPU per request on the same machine.
   */
  run: (process.env.BENCH_RUN === 'source' ? 'source' : 'dist') as 'dist' | 'source',
};

const targets = {
  direct: { label: '(a) upstream direct' },
  bare: { label: '(b) bare Koa + undici' },
  typed: { label: '(c) typed proxy, log warn' },
  typedInfo: { label: "(c') typed proxy, log info" },
  typedBase: { label: '(c0) typed proxy, BENCH_BASELINE' },
  typedLean: { label: '(c-) typed proxy, no audit/result check' },
} as const;
type TargetKey = keyof typeof targets;

/** The issue's targets for (c) against (b) at 32 connections. */
const goals = { cpuRatio: 1.2, rpsRatio: 0.85, addedP99Ms: 2 };

const body = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'echo', arguments: { message: 'hello' } },
});
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

type Target = CommonTarget<TargetKey>;
type Row = CommonRow<TargetKey>;

const clk = clockTicks();
const pinned = hasTaskset() && cpus().length >= 2;
const pin = (cpu: string) => (pinned ? cpu : undefined);
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));

/** One request as the load generator sends it; checks the answer is the upstream's echo. */
async function check(t: { url: string; expectHeader?: string }): Promise<Record<string, string>> {
  const res = await request(t.url, { method: 'POST', headers, body, headersTimeout: 5000, bodyTimeout: 5000 });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 500)}`);
  let echoed: unknown;
  try {
    echoed = JSON.parse(text)?.result?.content?.[0]?.text;
  } catch {
    throw new Error(`not JSON: ${text.slice(0, 200)}`);
  }
  if (echoed !== 'Echo: hello') throw new Error(`unexpected answer: ${text.slice(0, 500)}`);
  const proxyHeaders: Record<string, string> = {};
  for (const [k, v] of Object.entries(res.headers)) if (k.startsWith('x-proxy-')) proxyHeaders[k] = String(v);
  if (t.expectHeader && res.headers[t.expectHeader.toLowerCase()] === undefined) {
    throw new Error(`no ${t.expectHeader} header (got ${JSON.stringify(res.headers)})`);
  }
  return proxyHeaders;
}

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const resultsDir = join(root, 'bench', 'results');
const profileDir = join(resultsDir, `typed-proxy-${stamp}-profiles`);
/** Node flags that make a target write a CPU profile into its own directory on exit. */
const profiling = (key: TargetKey) =>
  settings.profile && (key === 'bare' || key === 'typed' || key === 'typedBase')
    ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, key)}`]
    : [];

/** One of this directory's node:http servers, pinned to the target core (and profiled when asked). */
const startServer = (file: string, env: Record<string, string>, key: TargetKey) =>
  startNodeServer(join(here, file), env, pin(settings.targetCpu), profiling(key));

/**
 * (c-): the shipped config without its audit stages and its tool-result check (the egress policy
 * stages), written next to the original so that its relative paths resolve the same: what the
 * typed proxy costs without them, to compare with a baseline that predates them.
 */
function leanConfig(): string {
  type Stage = Record<string, { phase?: string }>;
  const config = parseYaml(readFileSync(join(root, 'configs/typed-proxy.yaml'), 'utf8')) as {
    routes: Array<{ pipeline?: Stage[] }>;
  };
  const added = (s: Stage) => 'audit' in s || s.policy?.phase === 'egress';
  for (const route of config.routes) if (route.pipeline) route.pipeline = route.pipeline.filter((s) => !added(s));
  const file = join(root, 'configs', `.bench-lean-${process.pid}.yaml`);
  writeFileSync(file, stringify(config, { aliasDuplicateObjects: false }));
  process.once('exit', () => rmSync(file, { force: true }));
  return file;
}

async function startTyped(
  upstreamPort: number,
  key: TargetKey,
  logLevel: string,
  dir = root,
): Promise<{ s: Started; url: string }> {
  const [port, metrics, admin] = [await freePort(), await freePort(), await freePort()];
  const url = `http://127.0.0.1:${port}/`;
  const s = await startService({
    dir,
    config: key === 'typedLean' ? leanConfig() : 'configs/typed-proxy.yaml',
    sets: [
      `listen.port=${port}`,
      `metrics.port=${metrics}`,
      `admin.port=${admin}`,
      `upstreams.everything={kind: jsonrpc, url: "http://127.0.0.1:${upstreamPort}/"}`,
      ...settings.typedSet,
    ],
    // Auth and rate limiting off whatever the caller's environment says; the bench measures the pipeline.
    env: { LOG_LEVEL: logLevel, PROXY_AUTH: 'false', PROXY_RATE_LIMIT: 'false' },
    run: settings.run,
    cpu: pin(settings.targetCpu),
    nodeFlags: profiling(key),
    logFile: join(logDir, `typed-proxy-${key}-${logLevel}.log`),
    name: 'typed proxy',
    readyTimeoutMs: 40000,
    probe: () => check({ url, expectHeader: 'X-Proxy-SType' }),
  });
  return { s, url };
}

const measureTarget = (t: Target, connections: number, round: number, warmupMs: number) =>
  measure(t, {
    connections,
    round,
    warmupMs,
    durationMs: settings.durationMs,
    loadCpu: pin(settings.loadCpu),
    targetCore: pinned && /^\d+$/.test(settings.targetCpu) ? Number(settings.targetCpu) : undefined,
    clockTicks: clk,
  });

function printRows(rows: Row[]): void {
  printTable(
    [
      'target',
      'conns',
      'req/s',
      'p50 ms',
      'p99 ms',
      'CPU µs/req',
      'upstream µs/req',
      'loadgen CPU',
      'core busy/other',
      'errors',
    ],
    rows.map((r) => [
      targets[r.target].label,
      String(r.connections),
      fmt(r.rps, 0),
      fmt(r.p50Ms, 2),
      fmt(r.p99Ms, 2),
      fmt(r.cpuUsPerReq, 1),
      fmt(r.upstreamUsPerReq, 1),
      `${fmt(r.loadgenCpu * 100, 0)}%`,
      r.coreBusy === undefined ? '-' : `${fmt(r.coreBusy * 100, 0)}% / ${fmt((r.coreOthers ?? 0) * 100, 0)}%`,
      String(r.errors),
    ]),
    [28, 5, 8, 7, 7, 10, 15, 11, 15, 6],
  );
}

interface Comparison {
  connections: number;
  subject: TargetKey;
  baseline: TargetKey;
  cpuRatio: number;
  rpsRatio: number;
  addedP50Ms: number;
  addedP99Ms: number;
  verdict?: { cpu: boolean; rps: boolean; p99: boolean };
}

const pairs: Array<[TargetKey, TargetKey]> = [
  ['typed', 'typedBase'],
  ['typed', 'typedLean'],
  ['typedLean', 'typedBase'],
  ['typed', 'bare'],
  ['typedInfo', 'bare'],
  ['typed', 'direct'],
  ['bare', 'direct'],
];

/** Ratios of the pairs measured in the same round (back to back, so under the same machine load). */
function compareRound(rows: Row[]): Comparison[] {
  const out: Comparison[] = [];
  for (const connections of settings.connections) {
    for (const [subject, baseline] of pairs) {
      const s = rows.find((r) => r.target === subject && r.connections === connections);
      const b = rows.find((r) => r.target === baseline && r.connections === connections);
      if (!s || !b) continue;
      out.push({
        connections,
        subject,
        baseline,
        cpuRatio: s.cpuUsPerReq / b.cpuUsPerReq,
        rpsRatio: s.rps / b.rps,
        addedP50Ms: s.p50Ms - b.p50Ms,
        addedP99Ms: s.p99Ms - b.p99Ms,
      });
    }
  }
  return out;
}

/** The median of each per-round ratio, judged against the issue's targets where they apply. */
function aggregate(perRound: Comparison[], goalConnections: number): Comparison[] {
  const out: Comparison[] = [];
  for (const connections of settings.connections) {
    for (const [subject, baseline] of pairs) {
      const mine = perRound.filter(
        (c) => c.connections === connections && c.subject === subject && c.baseline === baseline,
      );
      if (mine.length === 0) continue;
      const c: Comparison = {
        connections,
        subject,
        baseline,
        cpuRatio: mid(mine.map((x) => x.cpuRatio))!,
        rpsRatio: mid(mine.map((x) => x.rpsRatio))!,
        addedP50Ms: mid(mine.map((x) => x.addedP50Ms))!,
        addedP99Ms: mid(mine.map((x) => x.addedP99Ms))!,
      };
      if (baseline === 'bare' && subject !== 'bare' && connections === goalConnections) {
        c.verdict = {
          cpu: c.cpuRatio <= goals.cpuRatio,
          rps: c.rpsRatio >= goals.rpsRatio,
          p99: c.addedP99Ms <= goals.addedP99Ms,
        };
      }
      out.push(c);
    }
  }
  return out;
}

function printComparisons(list: Comparison[], goalConnections: number): void {
  const short: Record<TargetKey, string> = {
    direct: '(a)',
    bare: '(b)',
    typed: '(c)',
    typedInfo: "(c')",
    typedBase: '(c0)',
    typedLean: '(c-)',
  };
  console.log(
    `\ntargets for (c) vs (b) at ${goalConnections} connections: CPU/request <= ${goals.cpuRatio}x, ` +
      `throughput >= ${goals.rpsRatio}x, added p99 <= ${goals.addedP99Ms} ms`,
  );
  printTable(
    ['ratio (median of per-round pairs)', 'conns', 'CPU/request', 'throughput', 'added p50', 'added p99'],
    list.map((c) => [
      `${short[c.subject]} ${targets[c.subject].label.slice(short[c.subject].length + 1)} vs ${short[c.baseline]}`,
      String(c.connections),
      `${fmt(c.cpuRatio, 2)}x${verdict(c.verdict?.cpu)}`,
      `${fmt(c.rpsRatio, 2)}x${verdict(c.verdict?.rps)}`,
      `${signed(c.addedP50Ms)} ms`,
      `${signed(c.addedP99Ms)} ms${verdict(c.verdict?.p99)}`,
    ]),
    [34, 5, 13, 13, 10, 14],
  );
}

/** Stops the profiled targets (the profile is written on exit) and prints where their CPU time went. */
async function profileReports(list: Target[], all: Row[]): Promise<Record<string, ProfileReport>> {
  const out: Record<string, ProfileReport> = {};
  for (const t of list) {
    if (profiling(t.key).length === 0) continue;
    await stop(t.proc.child, 15000);
    const dir = join(profileDir, t.key);
    if (!existsSync(dir)) continue;
    // The main thread's profile is the big one (workers, if any, write their own).
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => join(dir, f))
      .sort((a, b) => statSync(b).size - statSync(a).size);
    if (!files[0]) continue;
    const rows = all.filter((r) => r.target === t.key);
    const windows = rows.map((r) => [BigInt(r.windowNs[0]), BigInt(r.windowNs[1])] as [bigint, bigint]);
    const requests = rows.reduce((s, r) => s + r.requests, 0);
    const cpuUs = rows.reduce((s, r) => s + r.cpuUsPerReq * r.requests, 0);
    // The baseline checkout's frames are its own project code.
    const report = await analyseProfile(
      files[0],
      windows,
      requests,
      cpuUs,
      t.key === 'typedBase' ? (settings.baseline ?? root) : root,
    );
    out[t.key] = report;
    console.log(
      `\nprofile of ${targets[t.key].label}, measured windows only: shares of the main thread's samples, ` +
        `µs = share of the measured ${fmt(report.cpuUsPerRequest, 1)} µs CPU/request\n  ${files[0]}`,
    );
    for (const h of report.hotspots.slice(0, settings.profileRows)) {
      console.log(`  ${fmt(h.usPerRequest, 1).padStart(7)} µs  ${fmt(h.share * 100, 1).padStart(5)}%  ${h.where}`);
    }
  }
  const [base, now] = [out.typedBase, out.typed];
  if (base && now) printProfileDiff(base, now);
  return out;
}

/**
 * Where (c) spends more CPU per request than (c0), by source file (stages and runtime modules, or
 * the library or Node module the time went to): the first place to look for a regression.
 */
function printProfileDiff(base: ProfileReport, now: ProfileReport): void {
  const byFile = (r: ProfileReport) => {
    const m = new Map<string, number>();
    for (const h of r.hotspots) {
      const file = h.where.replace(/:\d+(:\d+)? .*$/, '');
      m.set(file, (m.get(file) ?? 0) + h.usPerRequest);
    }
    return m;
  };
  const [b, n] = [byFile(base), byFile(now)];
  const rows = [...new Set([...b.keys(), ...n.keys()])]
    .map((file) => ({ file, base: b.get(file) ?? 0, now: n.get(file) ?? 0 }))
    .sort((x, y) => y.now - y.base - (x.now - x.base));
  console.log(
    `\nprofile difference, (c) vs (c0): CPU µs per request by file (${fmt(now.cpuUsPerRequest, 1)} vs ` +
      `${fmt(base.cpuUsPerRequest, 1)}), the largest increases first`,
  );
  for (const r of rows.slice(0, settings.profileRows)) {
    console.log(
      `  ${fmt(r.base, 1).padStart(7)} ${fmt(r.now, 1).padStart(7)} ${signed(r.now - r.base, 1).padStart(7)}  ${r.file}`,
    );
  }
}

async function main(): Promise<number> {
  if (settings.run === 'dist') {
    console.log(
      'building dist/ (npm run build): the typed proxy runs the compiled build, as shipped (BENCH_RUN=source: tsx)',
    );
    execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'ignore' });
    if (settings.baseline && !existsSync(join(settings.baseline, 'dist/runtime/cli/main.js'))) {
      console.log('note: BENCH_BASELINE has no dist/ build: (c0) runs its sources through tsx, (c) the build');
    }
  }
  // Every measurement: a short re-warm-up, the window and ~0.6 s to start the generator; plus the first warm-ups.
  const kinds = (settings.accessLog ? 4 : 3) + (settings.baseline ? 1 : 0);
  const perRun = Math.min(settings.warmupMs, 1000) + settings.durationMs + 600;
  const estimate =
    (perRun * kinds * settings.connections.length * settings.rounds + kinds * settings.warmupMs) / 1000 + 10;
  console.log(
    `typed-proxy bench: ${settings.connections.join(', ')} connections, warm-up ${settings.warmupMs / 1000} s, ` +
      `${settings.durationMs / 1000} s measured, ${settings.rounds} round(s), ~${Math.round(estimate)} s in all`,
  );
  console.log(
    pinned
      ? `load generator on CPU ${settings.loadCpu}, targets and upstream on CPU ${settings.targetCpu} (taskset); CLK_TCK ${clk}`
      : 'WARNING: taskset missing or fewer than 2 CPUs: nothing is pinned, figures are less comparable',
  );
  if (estimate > 180) console.log('WARNING: these settings run past 3 minutes');
  if (settings.profile)
    console.log('BENCH_PROFILE=1: (b) and (c) run under the CPU profiler; their figures are inflated');

  const upstream = await startServer('upstream.ts', {}, 'direct');
  const upstreamUrl = `http://127.0.0.1:${upstream.port}/`;
  const bare = await startServer('bare-proxy.ts', { UPSTREAM_URL: upstreamUrl }, 'bare');
  const list: Target[] = [
    { key: 'direct', url: upstreamUrl, proc: upstream.s, body, headers },
    { key: 'bare', url: `http://127.0.0.1:${bare.port}/`, proc: bare.s, upstream: upstream.s, body, headers },
  ];
  const failures: Record<string, string> = {};
  for (const [key, level] of [
    ['typed', 'warn'],
    ['typedInfo', 'info'],
    ['typedBase', 'warn'],
    ['typedLean', 'warn'],
  ] as const) {
    if (key === 'typedInfo' && !settings.accessLog) continue;
    if (key === 'typedBase' && !settings.baseline) continue;
    try {
      const typed = await startTyped(upstream.port, key, level, key === 'typedBase' ? settings.baseline : root);
      list.push({
        key,
        url: typed.url,
        proc: typed.s,
        upstream: upstream.s,
        body,
        headers,
        expectHeader: 'X-Proxy-SType',
      });
    } catch (err) {
      failures[key] = (err as Error).message;
      console.log(`\n${targets[key].label}: could not start\n${failures[key]}\n`);
    }
  }
  for (const t of list) {
    const seen = await check(t);
    console.log(`${targets[t.key].label}: ${t.url} ok ${Object.keys(seen).length ? JSON.stringify(seen) : ''}`);
  }

  const all: Row[] = [];
  const perRound: Comparison[] = [];
  const warmed = new Set<TargetKey>();
  for (let round = 1; round <= settings.rounds; round++) {
    // Interleaved; the ratios pair measurements taken minutes, not rounds, apart.
    const order = roundOrder(list, round);
    const rows: Row[] = [];
    for (const connections of settings.connections) {
      for (const t of order) {
        // The first measurement of a target also warms up its JIT; later ones only reconnect.
        const warmupMs = warmed.has(t.key) ? Math.min(settings.warmupMs, 1000) : settings.warmupMs;
        warmed.add(t.key);
        const row = await measureTarget(t, connections, round, warmupMs);
        rows.push(row);
        console.log(
          `  round ${round}, ${String(connections).padStart(2)} conns, ${targets[t.key].label.padEnd(27)} ` +
            `${fmt(row.rps, 0).padStart(6)} req/s  p99 ${fmt(row.p99Ms, 2).padStart(6)} ms  ` +
            `${fmt(row.cpuUsPerReq, 1).padStart(6)} µs CPU/req` +
            (row.coreOthers !== undefined ? `  (other load on target core ${fmt(row.coreOthers * 100, 0)}%)` : '') +
            (row.errors ? `  ${row.errors} errors (${row.firstError})` : ''),
        );
      }
    }
    all.push(...rows);
    perRound.push(...compareRound(rows));
  }

  const rows: Row[] = [];
  for (const connections of settings.connections) {
    for (const t of list) {
      const mine = all.filter((r) => r.target === t.key && r.connections === connections);
      if (mine.length) rows.push(medianRow(mine));
    }
  }
  const goalConnections = settings.connections.includes(32) ? 32 : Math.max(...settings.connections);
  const comparisons = aggregate(perRound, goalConnections);
  console.log(`\nmedians over ${settings.rounds} round(s):`);
  printRows(rows);
  printComparisons(comparisons, goalConnections);
  const saturated = rows.filter((r) => r.loadgenCpu > 0.9);
  if (saturated.length) {
    console.log(
      `\nnote: the load generator used >90% of its core for ${saturated.map((r) => `${r.target}@${r.connections}`).join(', ')}; ` +
        'there the throughput is the generator’s limit; CPU/request is still the target’s own.',
    );
  }
  const noisy = rows.filter((r) => (r.coreOthers ?? 0) > 0.25);
  if (noisy.length) {
    console.log(
      '\nnote: other processes (or interrupts) took more than 25% of the target core during ' +
        `${noisy.map((r) => `${r.target}@${r.connections}`).join(', ')}: the machine was busy, figures are noisy.`,
    );
  }

  const profiles = settings.profile ? await profileReports(list, all) : {};
  writeResults(join(resultsDir, `typed-proxy-${stamp}.json`), {
    date: new Date().toISOString(),
    machine: machine(pinned),
    settings,
    clockTicks: clk,
    goals,
    rows,
    comparisons,
    perRound: { rows: all, comparisons: perRound },
    failures,
    profiles,
  });
  return Object.keys(failures).length ? 1 : 0;
}

await runBench(main, { logDir, keepLogs: settings.keepLogs });
