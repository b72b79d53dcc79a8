/**
 * What a metric update costs the request path: nanoseconds per update through the metrics kit
 * (runtime/observability/metrics.ts: a counter's increments summed per series until a flush; our
 * own histogram, histogram.ts) against plain prom-client metrics in the same run, flushes and a
 * scrape included:
 *
 * - counter `inc(labels)` with three labels (the policy stage's decisions: a few series);
 * - histogram `observe(labels, v)` with one label (a stage's score by profile);
 * - histogram child `observe(v)` (kept by labelledSeries: the request's duration by route and method).
 *
 *   npx tsx bench/metrics/updates.ts
 *
 * The two sides take turns (BENCH_ROUNDS rounds, default 9, of 500 000 updates each); the median
 * round is printed, with the ratio of the kit to prom-client.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { createMetricsKit, latencyBuckets } from '../../runtime/observability/metrics.ts';

const rounds = Number(process.env.BENCH_ROUNDS) > 0 ? Number(process.env.BENCH_ROUNDS) : 9;
const n = 500_000;
const rules = ['none', 'deny-secrets', 'flag-injection', 'allow-listed'];
const seconds = (i: number) => 0.0003 + (i & 15) * 0.0007;

interface Side {
  update: (i: number) => void;
  read: () => Promise<string>;
}
type Make = (kit: boolean) => Side;

const cases: Array<[string, Make]> = [
  [
    'counter inc(labels)',
    (kit) => {
      const spec = { name: 'b_total', help: 'h', labelNames: ['policy', 'rule', 'action'] as const };
      const { registry, c } = kit
        ? (() => {
            const k = createMetricsKit();
            return { registry: k.registry, c: k.counter(spec) };
          })()
        : (() => {
            const registry = new Registry();
            return { registry, c: new Counter({ ...spec, registers: [registry] }) };
          })();
      return {
        update: (i) => c.inc({ policy: 'p', rule: rules[i & 3] as string, action: i & 1 ? 'allow' : 'flag' }),
        read: () => registry.metrics(),
      };
    },
  ],
  [
    'histogram observe(labels, v)',
    (kit) => {
      const spec = { name: 'b_score', help: 'h', labelNames: ['profile'] as const, buckets: [0.25, 0.5, 0.75, 1] };
      if (kit) {
        const k = createMetricsKit();
        const h = k.histogram(spec);
        return { update: (i) => h.observe({ profile: 'default' }, (i & 7) / 8), read: () => k.registry.metrics() };
      }
      const registry = new Registry();
      const h = new Histogram({ ...spec, registers: [registry] });
      return { update: (i) => h.observe({ profile: 'default' }, (i & 7) / 8), read: () => registry.metrics() };
    },
  ],
  [
    'histogram child observe(v)',
    (kit) => {
      const spec = { name: 'b_seconds', help: 'h', labelNames: ['route', 'method'] as const, buckets: latencyBuckets };
      if (kit) {
        const k = createMetricsKit();
        const child = k.histogram(spec).labels('jsonrpc', 'POST');
        return { update: (i) => child.observe(seconds(i)), read: () => k.registry.metrics() };
      }
      const registry = new Registry();
      const child = new Histogram({ ...spec, registers: [registry] }).labels('jsonrpc', 'POST');
      return { update: (i) => child.observe(seconds(i)), read: () => registry.metrics() };
    },
  ],
];

async function nsPerUpdate(make: Make, kit: boolean): Promise<number> {
  const { update, read } = make(kit);
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) update(i);
  await read();
  return Number(process.hrtime.bigint() - started) / n;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] as number;
for (const [name, make] of cases) {
  const kit: number[] = [];
  const plain: number[] = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2) {
      kit.push(await nsPerUpdate(make, true));
      plain.push(await nsPerUpdate(make, false));
    } else {
      plain.push(await nsPerUpdate(make, false));
      kit.push(await nsPerUpdate(make, true));
    }
  }
  const k = median(kit);
  const p = median(plain);
  console.log(
    `${name.padEnd(30)} prom-client ${p.toFixed(0).padStart(4)} ns, kit ${k.toFixed(0).padStart(4)} ns: ${(k / p).toFixed(2)}x`,
  );
}
