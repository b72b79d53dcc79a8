/**
 * `npx tsx bench/safety-filter/profile-filter.ts`: CPU-profiles the safety filter under a steady
 * load of the bench's 2 KB chat request (32 connections, PROFILE_SECONDS, default 8) and prints
 * where its time goes: per project frame (the nearest runtime/ or plugins/ function on the stack,
 * as bench:safety's profile does) and per self-time function. For finding hot spots, not figures:
 * the profiler inflates every cost. PROFILE_TENANT: `shipped` (default) or `tier-a` (filter-setup.ts
 * benchTenantWork).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { startNodeServer, waitUntilReady } from '../common/harness.ts';
import { start } from '../typed-proxy/children.ts';
import { analyseProfile, componentLines } from '../typed-proxy/profile.ts';
import { benchTenantWork, filterSets, writeBenchTenants } from './filter-setup.ts';

const here = fileURLToPath(new URL('../..', import.meta.url));
/** PROFILE_CHECKOUT: another checkout of the repository (its node_modules present) to profile, e.g. a baseline. */
const root = process.env.PROFILE_CHECKOUT ? resolve(process.env.PROFILE_CHECKOUT) : here;
const dir = mkdtempSync(join(tmpdir(), 'switchyard-prof-'));
const seconds = Number(process.env.PROFILE_SECONDS ?? 8);
const key = 'sk-dev-local-0001';
const backend = await startNodeServer(join(here, 'bench/safety-filter/backend.ts'), {}, undefined);
const tenants = writeBenchTenants(dir, key, 'llm', ...benchTenantWork(root, process.env.PROFILE_TENANT));
const { port, sets } = await filterSets(backend.port);
const bare = process.env.PROFILE_TARGET === 'bare';
/** PROFILE_HEAP=1: a sampling heap profile instead (allocation sites, bytes per request). */
const heap = process.env.PROFILE_HEAP === '1';
/**
 * PROFILE_GC=1: no profiler; V8's `--trace-gc` lines counted over the measured window instead:
 * scavenges and mark-compacts per 1,000 requests (an object that lands in the old generation on
 * every request shows as mark-compacts).
 */
const gc = process.env.PROFILE_GC === '1';
const gcLog = join(dir, 'gc.log');
const filter = bare
  ? (
      await startNodeServer(
        join(here, 'bench/typed-proxy/bare-proxy.ts'),
        { UPSTREAM_URL: `http://127.0.0.1:${backend.port}/v1/chat/completions` },
        undefined,
        ['--cpu-prof', `--cpu-prof-dir=${join(dir, 'prof')}`],
      )
    ).s
  : start(
      process.execPath,
      [
        ...(gc
          ? ['--trace-gc']
          : heap
            ? ['--heap-prof', `--heap-prof-dir=${join(dir, 'prof')}`, '--heap-prof-interval=4096']
            : ['--cpu-prof', `--cpu-prof-dir=${join(dir, 'prof')}`]),
        'bin/switchyard.js',
        'serve',
        process.env.PROFILE_CONFIG ?? 'configs/safety-filter.yaml',
        ...sets.flatMap((s) => ['--set', s]),
      ],
      {
        cwd: root,
        ...(gc ? { logFile: gcLog } : {}),
        env: {
          ...process.env,
          LOG_LEVEL: 'warn',
          FILTER_TENANTS_FILE: tenants,
          FILTER_AUDIT_PATH: join(dir, 'audit.db'),
        },
      },
    );
async function portOf(s: { output(): string }): Promise<number> {
  return Number(/listening (\d+)/.exec(s.output())?.[1]);
}
const content = 'Please summarise the notes from our weekly planning meeting for the team newsletter. '.repeat(22);
/** PROFILE_STREAM=1: the same chat request with `stream: true` (the answer comes as SSE). */
const stream = process.env.PROFILE_STREAM === '1' || process.env.PROFILE_CHUNKS !== undefined;
/**
 * PROFILE_CHUNKS=N: one streamed answer of N deltas of 4 characters at a time, as fast as the
 * backend sends them (bench:safety's "CPU per streamed chunk"); figures per chunk, not per request.
 */
const chunks = Number(process.env.PROFILE_CHUNKS ?? 0);
const body = JSON.stringify({
  model: chunks > 0 ? `paced-0-${chunks * 4}-4` : 'gpt-4o-mini',
  messages: [
    { role: 'system', content: 'You are a helpful assistant that writes concise summaries.' },
    { role: 'user', content },
  ],
  ...(stream ? { stream: true } : {}),
});
const url = `http://127.0.0.1:${bare ? await portOf(filter) : port}`;
const pool = new Pool(url, { connections: 32 });
const send = async () => {
  const res = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body,
  });
  await res.body.text();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
};
await waitUntilReady(filter, 'filter', 90_000, send);
const run = async (ms: number) => {
  let n = 0;
  const end = Date.now() + ms;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (Date.now() < end) {
        await send();
        n++;
      }
    }),
  );
  return n;
};
/** One answer of `chunks` deltas at a time: the count is of chunks. */
const runChunks = async (ms: number) => {
  let n = 0;
  const end = Date.now() + ms;
  while (Date.now() < end) {
    await send();
    n += chunks;
  }
  return n;
};
const load = chunks > 0 ? runChunks : run;
await load(2000);
const cpu0 = process.cpuUsage();
const gcBefore = gc ? gcCounts() : undefined;
const t0 = process.hrtime.bigint();
const n = await load(seconds * 1000);
const t1 = process.hrtime.bigint();
void cpu0;
if (gcBefore) {
  const after = gcCounts();
  const per = (k: 'scavenges' | 'markCompacts') => ((1000 * (after[k] - gcBefore[k])) / n).toFixed(2);
  console.log(
    `${n} ${chunks > 0 ? 'chunks' : 'requests'} in ${seconds} s: per 1,000, ${per('scavenges')} scavenges, ` +
      `${per('markCompacts')} mark-compacts (--trace-gc)`,
  );
  await pool.close();
  filter.child.kill('SIGTERM');
  backend.s.child.kill('SIGTERM');
  process.exit(0);
}
await pool.close();
filter.child.kill('SIGTERM');
await new Promise((r) => filter.child.once('exit', r));
backend.s.child.kill('SIGTERM');
const profDir = join(dir, 'prof');
const file = readdirSync(profDir)
  .filter((f) => f.endsWith(heap ? '.heapprofile' : '.cpuprofile'))
  .map((f) => join(profDir, f))[0];
if (!file) throw new Error('no profile written');
console.log(
  `${n} ${chunks > 0 ? 'chunks' : 'requests'} in ${seconds} s (${Math.round(n / seconds)}/s under the profiler)`,
);
if (heap) {
  printHeap(file, n);
  process.exit(0);
}
const report = await analyseProfile(file, [[t0, t1]], n, 0, root);
console.log(`busy µs/request (sampled): ${report.busyUsPerRequest.toFixed(1)}`);
for (const h of report.hotspots.slice(0, Number(process.env.PROFILE_TOP ?? 45))) {
  console.log(
    `${(h.share * 100).toFixed(1).padStart(5)}%  ${(h.share * report.busyUsPerRequest).toFixed(1).padStart(6)} µs  ${h.where}`,
  );
}
console.log('\nby component (docs/performance.md, "What the goals would take"):');
for (const line of componentLines(report)) console.log(line);
console.log(`profile: ${file}`);

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}
/** Sampled bytes allocated per request by allocation site (whole run: warmup included). */
function printHeap(file: string, requests: number): void {
  const rootNode = (JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode }).head;
  const by = new Map<string, number>();
  let total = 0;
  const walk = (n: HeapNode) => {
    const f = n.callFrame;
    const where = `${f.url.replace(`file://${root}`, '').replace(/^node:/, 'node:')}:${f.lineNumber + 1} ${f.functionName || '(anonymous)'}`;
    by.set(where, (by.get(where) ?? 0) + n.selfSize);
    total += n.selfSize;
    for (const c of n.children) walk(c);
  };
  walk(rootNode);
  console.log(
    `sampled allocation: ${(total / requests).toFixed(0)} bytes/request (live at exit excluded? no: sampled allocations still reachable)`,
  );
  for (const [where, bytes] of [...by].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
    console.log(`${(bytes / requests).toFixed(0).padStart(7)} B  ${where}`);
  }
}

/** Collections --trace-gc has logged so far. */
function gcCounts(): { scavenges: number; markCompacts: number } {
  const text = readFileSync(gcLog, 'utf8');
  return { scavenges: text.split(': Scavenge').length - 1, markCompacts: text.split(': Mark-Compact').length - 1 };
}
