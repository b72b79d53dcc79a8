/**
 * The cost of the balancer per request, in process: the same small forwarded request through a
 * single-url upstream, the same with `retry:` (through the balancer's retry loop), a balanced one
 * with one endpoint, and with three endpoints (three pools to the same local server), as throughput ratios measured in one run with the variants
 * interleaved. `npx tsx bench/upstreams/balancer-cost.ts [requests per round]`
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { HttpUpstream } from '../../runtime/upstreams/types.ts';

const perRound = Number(process.argv[2] ?? 4000);
const rounds = 5;
const concurrency = 16;

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const deps = { logger: silentLogger, configDir: process.cwd() };

const variants: Record<string, HttpUpstream> = {
  single: createUpstream('u', { kind: 'http', url: base }, deps) as HttpUpstream,
  'balanced-1': createUpstream('u', { kind: 'http', endpoints: [{ url: base }] }, deps) as HttpUpstream,
  // A single url with retries on: run through the balancer's retry loop (nothing fails here).
  'single-retry': createUpstream(
    'u',
    { kind: 'http', url: base, retry: { attempts: 3, on: ['connect_failure', 'reset', 429, 503] } },
    deps,
  ) as HttpUpstream,
  'balanced-3': createUpstream(
    'u',
    { kind: 'http', endpoints: [{ url: base }, { url: base }, { url: base }] },
    deps,
  ) as HttpUpstream,
  'least-request-3': createUpstream(
    'u',
    { kind: 'http', endpoints: [{ url: base }, { url: base }, { url: base }], balance: 'least-request' },
    deps,
  ) as HttpUpstream,
  'consistent-hash-3': createUpstream(
    'u',
    {
      kind: 'http',
      endpoints: [{ url: base }, { url: base }, { url: base }],
      balance: 'consistent-hash',
      hash_on: { header: 'x-user' },
    },
    deps,
  ) as HttpUpstream,
};

/** CPU time per request (this process: the client side and the server), steadier than throughput on a shared machine. */
const cpu: Record<string, number[]> = {};

async function run(u: HttpUpstream, n: number, key?: string): Promise<number> {
  let left = n;
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) {
        // x-user: the consistent-hash variant's key (ignored by the others).
        const headers = { 'x-user': `user-${left & 255}` };
        const res = await u.forward({ method: 'POST', path: '/x', headers, body: '{"a":1}' });
        for await (const _ of res.body); // read to the end, so the connection is reused
      }
    }),
  );
  const used = process.cpuUsage(cpuStart);
  if (key) {
    cpu[key] ??= [];
    cpu[key].push((used.user + used.system) / n);
  }
  return n / ((performance.now() - started) / 1000);
}

for (const u of Object.values(variants)) await run(u, 500); // warm-up
const rates: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
const entries = Object.entries(variants);
for (let r = 0; r < rounds; r++) {
  // A different variant first in each round: the machine's drift spreads over all of them.
  for (let j = 0; j < entries.length; j++) {
    const [k, u] = entries[(r + j) % entries.length] as [string, HttpUpstream];
    rates[k]?.push(await run(u, perRound, k));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;
const single = median(rates.single as number[]);
for (const [k, xs] of Object.entries(rates)) {
  const m = median(xs);
  const c = median(cpu[k] as number[]);
  const c0 = median(cpu.single as number[]);
  console.log(
    `${k.padEnd(16)} ${m.toFixed(0).padStart(7)} req/s  ratio to single ${(m / single).toFixed(3)}   ` +
      `CPU ${c.toFixed(1)} µs/req, ratio ${(c / c0).toFixed(3)}`,
  );
}
// The balancer's own work per request (choosing an endpoint, without I/O): steadier than the
// throughput ratios above on a busy machine.
for (const k of ['balanced-3', 'least-request-3', 'consistent-hash-3']) {
  const choose = (variants[k] as unknown as { choose(tried: number[], key?: string): number }).choose.bind(variants[k]);
  const n = 200_000;
  const keys = Array.from({ length: 1024 }, (_, i) => `session-${i}-${i * 7919}`);
  const started = performance.now();
  // consistent-hash: each pick hashes a key and walks the ring.
  for (let i = 0; i < n; i++) choose([], k === 'consistent-hash-3' ? keys[i & 1023] : undefined);
  console.log(`${k.padEnd(16)} choosing an endpoint: ${(((performance.now() - started) * 1000) / n).toFixed(2)} µs`);
}
await Promise.all(Object.values(variants).map((u) => u.close()));
server.close();
