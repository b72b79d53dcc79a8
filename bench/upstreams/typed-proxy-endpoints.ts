/**
 * The typed proxy (configs/typed-proxy.yaml, its strict pipeline on `POST /`) in front of a
 * `jsonrpc` upstream with three endpoints against the same proxy with one, as ratios measured in
 * one run: the variants alternate round by round, so the machine's drift spreads over both.
 * Two kinds of endpoints (bench/typed-proxy/upstream.ts processes):
 *   - instant: they answer at once, so the proxy's core is the limit and the ratio is the
 *     balancer's own cost (three pools, picking, health bookkeeping);
 *   - busy: one worker each, BENCH_SERVICE_MS (default 2) per request, so the endpoints are the
 *     limit and the ratio is what three of them buy.
 * Then the balancer's cost per request in process (bench/upstreams/balancer-cost.ts).
 *
 * `npx tsx bench/upstreams/typed-proxy-endpoints.ts`; BENCH_ROUNDS (3), BENCH_DURATION (3 s),
 * BENCH_WARMUP (1 s), BENCH_CONNECTIONS (32), BENCH_SERVICE_MS (2). Load generator on core 0,
 * proxy and endpoints on core 1 (taskset, when there are two cores). Informational: never fails.
 */

import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { envNum, runBench, runLoad, startNodeServer, waitUntilReady } from '../common/harness.ts';
import { fmt, mid, printTable } from '../common/report.ts';
import { freePort, hasTaskset, runToEnd, type Started, start, stop } from '../typed-proxy/children.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const settings = {
  rounds: Math.floor(envNum('BENCH_ROUNDS', 3)),
  durationMs: envNum('BENCH_DURATION', 3) * 1000,
  warmupMs: envNum('BENCH_WARMUP', 1) * 1000,
  connections: Math.floor(envNum('BENCH_CONNECTIONS', 32)),
  serviceMs: envNum('BENCH_SERVICE_MS', 2),
};
const pinned = hasTaskset() && cpus().length >= 2;
const pin = (cpu: string) => (pinned ? cpu : undefined);
const logDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-endpoints-'));

const body = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'echo', arguments: { message: 'hello' } },
});
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function check(url: string): Promise<void> {
  const res = await request(url, { method: 'POST', headers, body, headersTimeout: 5000, bodyTimeout: 5000 });
  const text = await res.body.text();
  if (res.statusCode !== 200 || !text.includes('Echo: hello'))
    throw new Error(`${res.statusCode}: ${text.slice(0, 300)}`);
}

async function startProxy(upstream: string, label: string): Promise<{ s: Started; url: string }> {
  const [port, metrics, admin] = [await freePort(), await freePort(), await freePort()];
  const s = start(
    process.execPath,
    [
      'bin/switchyard.js',
      'serve',
      'configs/typed-proxy.yaml',
      ...['--set', `listen.port=${port}`, '--set', `metrics.port=${metrics}`, '--set', `admin.port=${admin}`],
      ...['--set', `upstreams.everything=${upstream}`],
    ],
    {
      cpu: pin('1'),
      cwd: root,
      env: { ...process.env, LOG_LEVEL: 'warn', LOG_FORMAT: 'json', PROXY_AUTH: 'false', PROXY_RATE_LIMIT: 'false' },
      logFile: join(logDir, `proxy-${label}.log`),
    },
  );
  const url = `http://127.0.0.1:${port}/`;
  await waitUntilReady(s, `typed proxy (${label})`, 40000, () => check(url));
  return { s, url };
}

interface Row {
  rps: number;
  p99Ms: number;
  errors: number;
}

async function measure(url: string, pids: number[]): Promise<Row> {
  const r = await runLoad(
    {
      url,
      connections: settings.connections,
      warmupMs: settings.warmupMs,
      durationMs: settings.durationMs,
      body,
      headers,
      expectHeader: 'X-Proxy-SType',
      pids,
    },
    pin('0'),
  );
  return { rps: r.rps, p99Ms: r.latencyMs.p99, errors: r.errors };
}

async function scenario(name: string, serviceMs: number): Promise<string[][]> {
  const ups = [];
  for (let i = 0; i < 3; i++) {
    ups.push(
      await startNodeServer(
        join(root, 'bench/typed-proxy/upstream.ts'),
        { BENCH_SERVICE_MS: String(serviceMs) },
        pin('1'),
      ),
    );
  }
  const urls = ups.map((u) => `http://127.0.0.1:${u.port}/`);
  const one = await startProxy(`{kind: jsonrpc, url: "${urls[0]}"}`, `${name}-one`);
  const three = await startProxy(
    `{kind: jsonrpc, endpoints: [${urls.map((u) => `{url: "${u}"}`).join(', ')}]}`,
    `${name}-three`,
  );
  const rows: Record<'one' | 'three', Row[]> = { one: [], three: [] };
  const upPids = ups.map((u) => u.s.pid);
  for (let r = 0; r < settings.rounds; r++) {
    // The other variant first in every other round.
    const order = r % 2 === 0 ? (['one', 'three'] as const) : (['three', 'one'] as const);
    for (const k of order) {
      const t = k === 'one' ? one : three;
      const row = await measure(t.url, [t.s.pid, ...upPids]);
      rows[k].push(row);
      console.log(
        `  ${name} round ${r + 1} ${k}: ${fmt(row.rps, 0)} req/s, p99 ${fmt(row.p99Ms, 2)} ms, errors ${row.errors}`,
      );
    }
  }
  for (const p of [one, three, ...ups]) await stop(p.s.child);
  const rps = (k: 'one' | 'three') => mid(rows[k].map((x) => x.rps)) as number;
  const p99 = (k: 'one' | 'three') => mid(rows[k].map((x) => x.p99Ms)) as number;
  // The ratio within each round (its two measurements were next to each other), then their
  // median: on a machine whose load drifts, steadier than a ratio of medians.
  const ratio = (f: (x: Row) => number) => mid(rows.three.map((x, r) => f(x) / f(rows.one[r] as Row))) as number;
  return [
    [
      name,
      fmt(rps('one'), 0),
      fmt(rps('three'), 0),
      fmt(
        ratio((x) => x.rps),
        3,
      ),
      fmt(p99('one'), 2),
      fmt(p99('three'), 2),
      fmt(
        ratio((x) => x.p99Ms),
        3,
      ),
    ],
  ];
}

await runBench(
  async () => {
    console.log(
      `typed proxy, jsonrpc upstream: three endpoints against one; ${settings.rounds} interleaved rounds of ` +
        `${settings.durationMs / 1000} s at ${settings.connections} connections${pinned ? ', pinned' : ', unpinned'}`,
    );
    const table = [
      ...(await scenario('instant', 0)),
      ...(await scenario(`busy ${settings.serviceMs} ms`, settings.serviceMs)),
    ];
    console.log('');
    printTable(
      ['endpoints', 'one req/s', 'three req/s', 'rps ratio*', 'one p99 ms', 'three p99 ms', 'p99 ratio*'],
      table,
    );
    console.log('* three / one within each round, median over the rounds; req/s and p99: medians');
    console.log('\nbalancer cost per request (in process, bench/upstreams/balancer-cost.ts):');
    const out = await runToEnd(process.execPath, ['--import', 'tsx', 'bench/upstreams/balancer-cost.ts'], {
      cwd: root,
      cpu: pin('1'),
    });
    console.log(out.trim());
    return 0;
  },
  { logDir, keepLogs: process.env.BENCH_KEEP_LOGS === '1' },
);
