/**
 * `npm run bench`: each shipped service's main route, from its config in configs/ as it ships,
 * against bare floors (a node:http + undici proxy, a Koa + undici proxy that buffers, nginx when
 * installed) in front of the same upstream, all in one run, in interleaved rounds. Prints CPU µs
 * per request of each gateway process, p50/p99 latency, and their ratios to the Koa floor
 * measured in the same round; writes bench/results/services-<timestamp>.json, and with
 * BENCH_HISTORY=1 a summary to bench/history/. A miss never fails the run. See bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNum, runBench, startNodeServer, waitUntilReady } from '../common/harness.ts';
import { measure, medianRow, type Row, roundOrder, type Target } from '../common/measure.ts';
import { formatRatio, type HistoryEntry, historyMarkdown, judge, type Ratio, ratio } from '../common/ratios.ts';
import { fmt, gitCommit, machine, printTable, verdict, writeResults } from '../common/report.ts';
import { hasTaskset, type Started, stop } from '../typed-proxy/children.ts';
import { clockTicks } from '../typed-proxy/proc.ts';
import { analyseProfile, componentLines, type ProfileReport } from '../typed-proxy/profile.ts';
import {
  type Context,
  chatRequest,
  type Family,
  SERVICES,
  type Subject,
  toolsCall,
  toolsCallHeaders,
  verify,
} from './cases.ts';
import { nginxBinary, startNginx } from './nginx.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const typedDir = join(root, 'bench', 'typed-proxy');
const list = (name: string, def: string, sep = ',') =>
  (process.env[name] ?? def)
    .split(sep)
    .map((x) => x.trim())
    .filter(Boolean);

const settings = {
  services: list('BENCH_SERVICES', SERVICES.map((s) => s.name).join(',')),
  rounds: Math.floor(envNum('BENCH_ROUNDS', 3)),
  /**
   * The first warm-up of a target (it also warms the JIT); later ones are at most 1 s. 6 s: after
   * 2 s V8 was still compiling the typed proxy's path (2026-12-02, ~4,500 requests/s: the first
   * round of `tools/call` measured 186 µs and p99 27.9 ms, the later ones 149–159 µs and 14 ms;
   * after 6 s the first round was 162 µs and 12.5 ms, as the later ones).
   */
  warmupMs: envNum('BENCH_WARMUP', 6) * 1000,
  durationMs: envNum('BENCH_DURATION', 2) * 1000,
  connections: Math.max(1, Math.floor(envNum('BENCH_CONNECTIONS', 32))),
  loadCpu: process.env.BENCH_LOAD_CPU ?? '0',
  targetCpu: process.env.BENCH_TARGET_CPU ?? '1',
  /** `dist` (default): the compiled build, as shipped, built first; `source`: through tsx. */
  run: (process.env.BENCH_RUN === 'source' ? 'source' : 'dist') as 'dist' | 'source',
  /** CPU-profile every service and the Koa floors, and print where each route's time goes. */
  profile: process.env.BENCH_PROFILE === '1',
  profileRows: Math.floor(envNum('BENCH_PROFILE_ROWS', 20)),
  /** Another checkout (with node_modules): its services join as `<route>@base`, for an A/B in one run. */
  baseline: process.env.BENCH_BASELINE,
  /** `0`: no nginx floor even when nginx is installed. */
  nginx: process.env.BENCH_NGINX !== '0',
  typedSet: list('BENCH_TYPED_SET', '', ';'),
  /** Append the run's summary to bench/history/ (a file per run, a table in its README). */
  history: process.env.BENCH_HISTORY === '1',
  startTimeoutMs: envNum('BENCH_START_TIMEOUT', 120) * 1000,
  keepLogs: process.env.BENCH_KEEP_LOGS === '1',
};

const clk = clockTicks();
const pinned = hasTaskset() && cpus().length >= 2;
const pin = (cpu: string) => (pinned ? cpu : undefined);
const targetCore = pinned && /^\d+$/.test(settings.targetCpu) ? Number(settings.targetCpu) : undefined;
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-services-'));
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const resultsDir = join(root, 'bench', 'results');
const profileDir = join(resultsDir, `services-${stamp}-profiles`);

/** The floor everything is judged against (the issue's "Koa + undici floor"), and the others shown beside. */
const FLOOR = 'koa';
const floorKinds = {
  koa: 'Koa + undici, buffers',
  node: 'node:http + undici',
  nginx: 'nginx',
} as const;
type FloorKind = keyof typeof floorKinds;
const floorKey = (kind: FloorKind, family: Family) => `floor-${kind}/${family}`;

interface Measured extends Target {
  label: string;
  /** The service route it measures; undefined for a floor. */
  subject?: Subject;
  /** The name of its process's profile folder, when profiled. */
  profile?: string;
}

/** Node flags that make a process write a CPU profile into its own folder on exit. */
const profiling = (name: string) =>
  settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name.replace(/[^\w.@-]/g, '_'))}`] : [];

async function startFloors(
  families: Family[],
  upstreams: Record<Family, { url: string; proc: Started }>,
): Promise<Measured[]> {
  const out: Measured[] = [];
  const requests: Record<Family, Pick<Target, 'body' | 'headers'>> = {
    jsonrpc: { body: toolsCall, headers: toolsCallHeaders },
    chat: { body: chatRequest(false), headers: { 'content-type': 'application/json', accept: 'application/json' } },
    'chat-stream': {
      body: chatRequest(true),
      headers: { 'content-type': 'application/json', accept: 'application/json' },
    },
  };
  // One process of each kind per upstream (chat and chat-stream share the LLM fixture's).
  const byUrl = new Map<string, Partial<Record<FloorKind, { url: string; proc: Started; profile?: string }>>>();
  for (const family of families) {
    const up = upstreams[family];
    if (byUrl.has(up.url)) continue;
    const node = await startNodeServer(
      join(typedDir, 'node-proxy.ts'),
      { UPSTREAM_URL: up.url },
      pin(settings.targetCpu),
    );
    const name = `floor-koa-${byUrl.size}`;
    const koa = await startNodeServer(
      join(typedDir, 'bare-proxy.ts'),
      { UPSTREAM_URL: up.url, BARE_BUFFER: '1' },
      pin(settings.targetCpu),
      profiling(name),
    );
    byUrl.set(up.url, {
      node: { url: `http://127.0.0.1:${node.port}${new URL(up.url).pathname}`, proc: node.s },
      koa: { url: `http://127.0.0.1:${koa.port}${new URL(up.url).pathname}`, proc: koa.s, profile: name },
    });
  }
  const binary = settings.nginx ? nginxBinary() : undefined;
  if (binary) {
    const urls = [...byUrl.keys()];
    const n = await startNginx(
      binary,
      urls.map((u) => new URL(u)),
      logDir,
      pin(settings.targetCpu),
    );
    urls.forEach((u, i) => {
      byUrl.get(u)!.nginx = { url: `http://127.0.0.1:${n.ports[i]}${new URL(u).pathname}`, proc: n.s };
    });
  } else console.log('no nginx floor (not installed, or BENCH_NGINX=0)');
  for (const family of families) {
    const up = upstreams[family];
    for (const [kind, f] of Object.entries(byUrl.get(up.url)!) as Array<
      [FloorKind, { url: string; proc: Started; profile?: string }]
    >) {
      const t: Measured = {
        key: floorKey(kind, family),
        label: `floor: ${floorKinds[kind]} (${family})`,
        url: f.url,
        proc: f.proc,
        upstream: up.proc,
        profile: f.profile,
        ...requests[family],
      };
      await waitUntilReady(f.proc, t.label, 15000, () => verify(t));
      out.push(t);
    }
  }
  return out;
}

/** Starts every selected service from `dir`; a service that fails to start is reported and left out. */
async function startSubjects(
  c: Context,
  upstreams: Partial<Record<Family, { proc: Started }>>,
  failures: Record<string, string>,
): Promise<Measured[]> {
  const out: Measured[] = [];
  for (const service of SERVICES.filter((s) => settings.services.includes(s.name))) {
    const started = Date.now();
    try {
      for (const s of await service.start(c)) {
        out.push({
          ...s,
          subject: s,
          upstream: s.proxied ? upstreams[s.family]?.proc : undefined,
          profile: settings.profile ? s.service + c.suffix : undefined,
        });
      }
      console.log(`${service.name}${c.suffix}: ready in ${fmt((Date.now() - started) / 1000, 1)} s`);
    } catch (err) {
      failures[service.name + c.suffix] = (err as Error).message;
      console.log(`\n${service.name}${c.suffix}: could not start\n${(err as Error).message.slice(0, 2000)}\n`);
    }
  }
  return out;
}

/** Each subject against the three floors of its family and, with BENCH_BASELINE, its baseline. */
function ratios(targets: Measured[], rows: Row[]): Ratio[] {
  const out: Ratio[] = [];
  for (const t of targets) {
    if (!t.subject || t.key.endsWith('@base')) continue;
    const against = (Object.keys(floorKinds) as FloorKind[]).map((k) => floorKey(k, t.subject!.family));
    if (settings.baseline) against.push(`${t.key}@base`);
    for (const b of against) {
      const r = ratio(rows, t.key, b);
      if (r) out.push(r);
    }
  }
  return out;
}

function printMedians(targets: Measured[], medians: Row[]): void {
  printTable(
    ['target', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'upstream µs/req', 'core other', 'errors'],
    medians.map((r) => [
      targets.find((t) => t.key === r.target)!.label,
      fmt(r.rps, 0),
      fmt(r.p50Ms, 2),
      fmt(r.p99Ms, 2),
      fmt(r.cpuUsPerReq, 1),
      fmt(r.upstreamUsPerReq, 1),
      r.coreOthers === undefined ? '-' : `${fmt(r.coreOthers * 100, 0)}%`,
      r.errors ? `${r.errors} (${r.firstError})` : '0',
    ]),
  );
}

function printRatios(targets: Measured[], list: Ratio[]): void {
  const find = (subject: string, kind: FloorKind, family: Family) =>
    list.find((r) => r.subject === subject && r.baseline === floorKey(kind, family));
  console.log(
    `\nratios to the floor measured in the same round (median of the rounds, least–greatest): ` +
      `CPU per request, p50 and p99 against ${floorKinds[FLOOR]}; CPU against the other floors`,
  );
  printTable(
    ['route', 'CPU', 'p50', 'p99', 'CPU vs node:http', 'CPU vs nginx', 'goal (CPU / p99)'],
    targets
      .filter((t) => t.subject && !t.key.endsWith('@base'))
      .map((t) => {
        const s = t.subject!;
        const main = find(t.key, FLOOR, s.family);
        const v = main ? judge(main, s.goal) : {};
        return [
          t.label,
          `${formatRatio(main?.cpu)}${verdict(v.cpu)}`,
          formatRatio(main?.p50, false),
          `${formatRatio(main?.p99, false)}${verdict(v.p99)}`,
          formatRatio(find(t.key, 'node', s.family)?.cpu, false),
          formatRatio(find(t.key, 'nginx', s.family)?.cpu, false),
          `≤ ${s.goal.cpu}×${s.goal.p99 ? ` / ≤ ${s.goal.p99}×` : ''}`,
        ];
      }),
  );
  const base = list.filter((r) => r.baseline.endsWith('@base'));
  if (base.length) {
    console.log('\nthis checkout against BENCH_BASELINE, same round:');
    printTable(
      ['route', 'CPU', 'p50', 'p99'],
      base.map((r) => [
        targets.find((t) => t.key === r.subject)!.label,
        formatRatio(r.cpu),
        formatRatio(r.p50, false),
        formatRatio(r.p99, false),
      ]),
    );
  }
}

/** Stops the profiled processes (the profile is written on exit) and prints where each route's CPU went. */
async function profiles(targets: Measured[], rows: Row[]): Promise<Record<string, ProfileReport>> {
  const out: Record<string, ProfileReport> = {};
  const stopped = new Set<number>();
  for (const t of targets) {
    if (!t.profile) continue;
    if (!stopped.has(t.proc.pid)) {
      stopped.add(t.proc.pid);
      await stop(t.proc.child, 15000);
    }
    const dir = join(profileDir, t.profile.replace(/[^\w.@-]/g, '_'));
    if (!existsSync(dir)) continue;
    // The main thread's profile is the largest (workers write their own).
    const file = readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => join(dir, f))
      .sort((a, b) => statSync(b).size - statSync(a).size)[0];
    if (!file) continue;
    const mine = rows.filter((r) => r.target === t.key);
    const requests = mine.reduce((s, r) => s + r.requests, 0);
    const cpuUs = mine.reduce((s, r) => s + r.cpuUsPerReq * r.requests, 0);
    const windows = mine.map((r) => [BigInt(r.windowNs[0]), BigInt(r.windowNs[1])] as [bigint, bigint]);
    const dirOf = t.key.endsWith('@base') ? (settings.baseline ?? root) : root;
    const report = await analyseProfile(file, windows, requests, cpuUs, dirOf);
    out[t.key] = report;
    console.log(
      `\nprofile of ${t.label}, measured windows only (µs = share of the measured ${fmt(report.cpuUsPerRequest, 1)} µs ` +
        `CPU/request; the profiler inflates it)\n  ${file}`,
    );
    for (const h of report.hotspots.slice(0, settings.profileRows)) {
      console.log(`  ${fmt(h.usPerRequest, 1).padStart(7)} µs  ${fmt(h.share * 100, 1).padStart(5)}%  ${h.where}`);
    }
    console.log('  by component (docs/performance.md, "What the goals would take"):');
    for (const line of componentLines(report)) console.log(`  ${line}`);
  }
  return out;
}

const HISTORY_HEAD = `# Benchmark history

One section per \`BENCH_HISTORY=1 npm run bench\` run, appended by bench/services/run.ts (the figures
in full: the JSON file of the same date and commit beside this one). Compare ratios: the CPU µs
per request depend on the machine and its load. See bench/README.md, "History".
`;

function writeHistory(targets: Measured[], medians: Row[], list: Ratio[]): void {
  const entry: HistoryEntry = {
    date: new Date().toISOString(),
    commit: gitCommit(),
    floor: floorKinds[FLOOR],
    connections: settings.connections,
    rounds: settings.rounds,
    rows: medians.map((r) => ({
      target: r.target,
      cpuUsPerReq: r.cpuUsPerReq,
      p50Ms: r.p50Ms,
      p99Ms: r.p99Ms,
      rps: r.rps,
    })),
    ratios: list
      .filter((r) => r.baseline.startsWith(`floor-${FLOOR}/`))
      .map((r) => ({ subject: r.subject, cpu: r.cpu.median, p50: r.p50.median, p99: r.p99.median })),
  };
  const dir = join(root, 'bench', 'history');
  mkdirSync(dir, { recursive: true });
  if (!existsSync(join(dir, 'README.md'))) writeFileSync(join(dir, 'README.md'), HISTORY_HEAD);
  writeResults(join(dir, `${entry.date.slice(0, 10)}-${entry.commit}.json`), entry);
  const labels = Object.fromEntries(targets.map((t) => [t.key, t.label]));
  appendFileSync(join(dir, 'README.md'), `\n${historyMarkdown(entry, labels)}`);
  console.log(`history: ${join(dir, 'README.md')}`);
}

async function main(): Promise<number> {
  const unknown = settings.services.filter((s) => !SERVICES.some((c) => c.name === s));
  if (unknown.length)
    throw new Error(
      `BENCH_SERVICES: no such service ${unknown.join(', ')} (${SERVICES.map((s) => s.name).join(', ')})`,
    );
  if (settings.run === 'dist') {
    console.log(
      'building dist/ (npm run build): the services run the compiled build, as shipped (BENCH_RUN=source: tsx)',
    );
    execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'ignore' });
  }
  console.log(
    pinned
      ? `load generator on CPU ${settings.loadCpu}, services, floors and upstreams on CPU ${settings.targetCpu} (taskset); CLK_TCK ${clk}`
      : 'WARNING: taskset missing or fewer than 2 CPUs: nothing is pinned, figures are less comparable',
  );
  if (settings.profile)
    console.log('BENCH_PROFILE=1: the services and the Koa floors run under the CPU profiler; figures are inflated');

  const chosen = SERVICES.filter((s) => settings.services.includes(s.name));
  const families = [...new Set(chosen.flatMap((s) => s.families)), 'jsonrpc' as const].filter(
    (f, i, all) => all.indexOf(f) === i,
  );
  const echo = await startNodeServer(join(typedDir, 'upstream.ts'), {}, pin(settings.targetCpu));
  const echoUrl = `http://127.0.0.1:${echo.port}/`;
  const upstreams: Partial<Record<Family, { url: string; proc: Started }>> = {
    jsonrpc: { url: echoUrl, proc: echo.s },
  };
  let backendUrl: string | undefined;
  if (families.some((f) => f.startsWith('chat'))) {
    const backend = await startNodeServer(join(root, 'bench/safety-filter/backend.ts'), {}, pin(settings.targetCpu));
    backendUrl = `http://127.0.0.1:${backend.port}/v1`;
    upstreams.chat = upstreams['chat-stream'] = { url: `${backendUrl}/chat/completions`, proc: backend.s };
  }
  const floors = await startFloors(families, upstreams as Record<Family, { url: string; proc: Started }>);
  const failures: Record<string, string> = {};
  const context = (dir: string, suffix: string): Context => ({
    dir,
    run: settings.run,
    cpu: pin(settings.targetCpu),
    logDir,
    nodeFlags: profiling,
    suffix,
    echoUrl,
    backendUrl,
    typedSet: suffix ? [] : settings.typedSet,
    readyTimeoutMs: settings.startTimeoutMs,
  });
  const subjects = await startSubjects(context(root, ''), upstreams, failures);
  if (settings.baseline)
    subjects.push(...(await startSubjects(context(settings.baseline, '@base'), upstreams, failures)));
  // Floors next to the routes compared with them, so that the pairs are measured close together.
  const targets: Measured[] = [];
  for (const family of families) {
    targets.push(...floors.filter((f) => f.key.endsWith(`/${family}`)));
    targets.push(...subjects.filter((s) => s.subject?.family === family));
  }

  const perRun = Math.min(settings.warmupMs, 1000) + settings.durationMs + 700;
  const estimate = (perRun * targets.length * settings.rounds + targets.length * settings.warmupMs) / 1000;
  console.log(
    `\n${targets.length} targets, ${settings.connections} connections, ${settings.rounds} round(s) of ` +
      `${settings.durationMs / 1000} s each: ~${Math.round(estimate)} s of measurement`,
  );

  const all: Row[] = [];
  const warmed = new Set<string>();
  for (let round = 1; round <= settings.rounds; round++) {
    for (const t of roundOrder(targets, round)) {
      const warmupMs = warmed.has(t.key) ? Math.min(settings.warmupMs, 1000) : settings.warmupMs;
      warmed.add(t.key);
      const row = await measure(t, {
        connections: settings.connections,
        round,
        warmupMs,
        durationMs: settings.durationMs,
        loadCpu: pin(settings.loadCpu),
        targetCore,
        clockTicks: clk,
      });
      all.push(row);
      console.log(
        `  round ${round}  ${t.label.padEnd(44)} ${fmt(row.rps, 0).padStart(6)} req/s  p99 ${fmt(row.p99Ms, 2).padStart(7)} ms  ` +
          `${fmt(row.cpuUsPerReq, 1).padStart(7)} µs CPU/req (ticks ${fmt(row.cpuTickUsPerReq, 0)})` +
          (row.errors ? `  ${row.errors} errors (${row.firstError})` : ''),
      );
    }
  }

  const medians = targets.map((t) => medianRow(all.filter((r) => r.target === t.key))).filter((r) => r);
  const list = ratios(targets, all);
  console.log(`\nmedians over ${settings.rounds} round(s), ${settings.connections} connections:`);
  printMedians(targets, medians);
  printRatios(targets, list);
  const noisy = medians.filter((r) => (r.coreOthers ?? 0) > 0.25);
  if (noisy.length) {
    console.log(
      `\nnote: other processes took more than 25% of the target core during ${noisy.map((r) => r.target).join(', ')}: ` +
        'the machine was busy; compare ratios within this run only.',
    );
  }
  const reports = settings.profile ? await profiles(targets, all) : {};
  writeResults(join(resultsDir, `services-${stamp}.json`), {
    date: new Date().toISOString(),
    commit: gitCommit(),
    machine: machine(pinned),
    settings,
    clockTicks: clk,
    targets: targets.map((t) => ({ key: t.key, label: t.label, url: t.url, goal: t.subject?.goal })),
    rows: medians,
    ratios: list,
    perRound: all,
    failures,
    profiles: reports,
  });
  if (settings.history) writeHistory(targets, medians, list);
  return Object.keys(failures).length ? 1 : 0;
}

await runBench(main, { logDir, keepLogs: settings.keepLogs });
