/**
 * `npx tsx bench/safety-filter/ablate.ts`: what each stage of the safety filter's chat route
 * costs. Starts the filter several times, each with one stage (or group) taken out of the chat
 * pipeline, plus the full filter and the bare Koa + undici proxy, all on the same core with the
 * backend; the pinned load generator (32 connections) visits them in interleaved rounds. Prints
 * CPU µs per request of each variant and the difference to the full filter: the cost of what it
 * lacks. For finding where the time goes, with less noise than a profile.
 *
 * Env: ABLATE (comma-separated variant names, default all; `name@KEY=value+KEY2=value` runs a variant
 * with extra environment variables, e.g. `full@SWITCHYARD_V8_FLAGS=`; NODE_ARGS goes on node's command line), BENCH_ROUNDS (5), BENCH_DURATION (3 s),
 * ABLATE_LAYOUTS (3: each variant runs as that many processes whose environments differ in size,
 * since the environment's size alone moves CPU per request by ~4%; a round averages them),
 * ABLATE_BASELINE (another checkout of the repository, with its node_modules: its full filter
 * joins as variant `baseline`, for an A/B of a code change), ABLATE_STREAM=1 (streamed answers),
 * ABLATE_TENANT (`shipped`, the default: the classifiers of the shipped development tenant, Tier B
 * included, and a token limit the load cannot reach, as `npm run bench` measures; `tier-a`: the
 * Tier A classifiers and no token limit, the measured tenant before 2026-12-01).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parse as parseYaml, stringify } from 'yaml';
import { cpuUsPerRequest, envNum, runBench, runLoad, startNodeServer, waitUntilReady } from '../common/harness.ts';
import { fmt, mid, printTable } from '../common/report.ts';
import { hasTaskset, type Started, start } from '../typed-proxy/children.ts';
import { clockTicks } from '../typed-proxy/proc.ts';
import { benchTenantWork, filterSets, writeBenchTenants } from './filter-setup.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));
const key = 'sk-dev-local-0001';
const rounds = envNum('BENCH_ROUNDS', 5);
const durationMs = envNum('BENCH_DURATION', 3) * 1000;
const layouts = Math.floor(envNum('ABLATE_LAYOUTS', 3));
const pinned = hasTaskset() && cpus().length >= 2;
const clk = clockTicks();
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-ablate-'));

type Pipeline = Array<Record<string, unknown>>;

/** The measured tenant's classifiers and tokens per minute (ABLATE_TENANT). */
const tenantWork = benchTenantWork(root, process.env.ABLATE_TENANT);
const stageName = (s: Record<string, unknown>) => Object.keys(s)[0];
const isEgress = (s: Record<string, unknown>) =>
  stageName(s) === 'policy' && (s.policy as { phase?: string }).phase === 'egress';
const isIngress = (s: Record<string, unknown>) => stageName(s) === 'policy' && !isEgress(s);

/** Variants: a name and what it does to the chat route's pipeline. */
const variants: Record<string, (p: Pipeline) => Pipeline> = {
  full: (p) => p,
  'no-response-headers': (p) => p.filter((s) => stageName(s) !== 'response-headers'),
  'no-rate-limit': (p) => p.filter((s) => stageName(s) !== 'rate-limit'),
  'no-validate-body': (p) => p.filter((s) => stageName(s) !== 'validate-body'),
  'no-audit': (p) => p.filter((s) => stageName(s) !== 'audit'),
  'no-classify': (p) => p.filter((s) => stageName(s) !== 'classify'),
  'no-token-limit': (p) => p.filter((s) => stageName(s) !== 'token-limit'),
  'no-ingress-policy': (p) => p.filter((s) => !isIngress(s)),
  'no-egress-policy': (p) => p.filter((s) => !isEgress(s)),
  'auth+proxy': (p) => p.filter((s) => ['tenant-auth', 'proxy'].includes(stageName(s))),
  // What a stage costs by itself: auth+proxy with eight stages that do nothing around the rest.
  'auth+proxy+8noop': (p) => {
    const kept = p.filter((s) => ['tenant-auth', 'proxy'].includes(stageName(s)));
    return [kept[0], ...Array.from({ length: 8 }, () => ({ 'response-headers': { set: {} } })), kept[1]];
  },
};
/** `<variant>@KEY=value+KEY2=value`: the variant with extra environment (e.g. an A/B of V8 flags). */
const variantOf = (name: string) => name.split('@')[0];
function envOf(name: string): Record<string, string> {
  const assignments = name.split('@')[1]?.split('+') ?? [];
  return Object.fromEntries(assignments.map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]));
}
const chosen = (process.env.ABLATE ?? Object.keys(variants).join(','))
  .split(',')
  .map((x) => x.trim())
  .filter((x) => variantOf(x) in variants);
if (!chosen.includes('full')) chosen.unshift('full');

/** ABLATE_STREAM=1: the chat request with `stream: true` (CPU per streamed answer, read to its end). */
const streamed = process.env.ABLATE_STREAM === '1';
const body = JSON.stringify({
  model: 'gpt-4o-mini',
  messages: [
    { role: 'system', content: 'You are a helpful assistant that writes concise summaries.' },
    { role: 'user', content: 'Please summarise the notes from our weekly planning meeting for the team. '.repeat(25) },
  ],
  ...(streamed ? { stream: true } : {}),
});
const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };

interface Target {
  name: string;
  url: string;
  proc: Started;
}

async function check(url: string): Promise<void> {
  const res = await request(url, { method: 'POST', headers, body });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 300)}`);
}

/** Runs the variant from `tree` (this checkout, or ABLATE_BASELINE for `baseline`). */
async function startVariant(name: string, backendPort: number, layout: number, tree = root): Promise<Target> {
  const config = parseYaml(readFileSync(resolve(tree, 'configs/safety-filter.yaml'), 'utf8')) as {
    routes: Array<{ pipeline: Pipeline }>;
  };
  config.routes[0].pipeline = (variants[variantOf(name)] ?? variants.full)(config.routes[0].pipeline);
  // Next to the original, so that its relative paths resolve the same.
  const id = `${chosen.indexOf(name)}-${layout}`;
  const file = resolve(tree, 'configs', `.ablate-${process.pid}-${id}.yaml`);
  writeFileSync(file, stringify(config, { aliasDuplicateObjects: false }));
  const tenants = writeBenchTenants(logDir, key, 'llm', ...tenantWork);
  const { port, sets } = await filterSets(backendPort);
  // NODE_ARGS: flags for node's command line (V8 flags that only work there, e.g. --single-threaded-gc).
  const nodeArgs = (envOf(name).NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const args = [...nodeArgs, 'bin/switchyard.js', 'serve', file, ...sets.flatMap((s) => ['--set', s])];
  const proc = start(process.execPath, args, {
    cpu: pinned ? '1' : undefined,
    cwd: tree,
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      FILTER_TENANTS_FILE: tenants,
      FILTER_AUDIT_PATH: join(logDir, `audit-${id}.db`),
      ...envOf(name),
      // The size of the environment moves the process's stack and memory layout, which alone
      // moves CPU per request by several percent: each variant runs under several layouts.
      SWITCHYARD_BENCH_LAYOUT: 'x'.repeat((layout * 1301) % 4096),
    },
    logFile: join(logDir, `${id}.log`),
  });
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  try {
    await waitUntilReady(proc, name, 90_000, () => check(url));
  } finally {
    rmSync(file, { force: true });
  }
  return { name, url, proc };
}

async function main(): Promise<number> {
  console.log(
    `ablation: ${chosen.join(', ')}; ${layouts} layout(s) each, ${rounds} rounds of ${durationMs / 1000} s, 32 connections` +
      (streamed ? ', streamed answers' : ''),
  );
  const backend = await startNodeServer(join(here, 'backend.ts'), {}, pinned ? '1' : undefined);
  const bare = await startNodeServer(
    join(root, 'bench/typed-proxy/bare-proxy.ts'),
    { UPSTREAM_URL: `http://127.0.0.1:${backend.port}/v1/chat/completions` },
    pinned ? '1' : undefined,
  );
  const targets: Target[] = [{ name: 'bare', url: `http://127.0.0.1:${bare.port}/v1/chat/completions`, proc: bare.s }];
  const baseline = process.env.ABLATE_BASELINE;
  for (let layout = 0; layout < layouts; layout++) {
    if (baseline) targets.push(await startVariant('baseline', backend.port, layout, resolve(baseline)));
    for (const name of chosen) targets.push(await startVariant(name, backend.port, layout));
  }
  const names = [...new Set(targets.map((t) => t.name))];
  /** Per variant, per round: the mean over its layouts. */
  const cpu: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 ? targets : [...targets].reverse();
    const sums: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    for (const t of order) {
      const r = await runLoad(
        {
          url: t.url,
          connections: 32,
          warmupMs: round === 1 ? 2000 : 500,
          durationMs,
          body,
          headers,
          pids: [t.proc.pid],
        },
        pinned ? '0' : undefined,
      );
      if (r.errors) throw new Error(`${t.name}: ${r.errors} errors (${r.firstError})`);
      sums[t.name].push(cpuUsPerRequest(r, t.proc.pid, clk));
    }
    for (const n of names) cpu[n].push(sums[n].reduce((a, b) => a + b, 0) / sums[n].length);
    console.log(`  round ${round}: ${names.map((n) => `${n} ${fmt(cpu[n].at(-1), 0)}`).join(', ')}`);
  }
  const full = mid(cpu.full) ?? Number.NaN;
  const bareUs = mid(cpu.bare) ?? Number.NaN;
  printTable(
    ['variant', 'CPU µs/req (median)', 'min-max', 'full minus this', 'x bare'],
    names.map((n) => {
      const m = mid(cpu[n]) ?? Number.NaN;
      return [
        n,
        fmt(m, 1),
        `${fmt(Math.min(...cpu[n]), 0)}-${fmt(Math.max(...cpu[n]), 0)}`,
        n === 'bare' || n === 'full' ? '' : fmt(full - m, 1),
        fmt(m / bareUs, 2),
      ];
    }),
  );
  return 0;
}

await runBench(main, { logDir, keepLogs: process.env.BENCH_KEEP_LOGS === '1' });
