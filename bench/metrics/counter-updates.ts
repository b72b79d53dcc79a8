/**
 * What a counter increment by a label object costs the request path: nanoseconds per `inc(labels)`
 * through the metrics kit (runtime/observability/metrics.ts: summed per series until a flush, one
 * prom-client update per series) against a plain prom-client Counter in the same run, flushes and
 * a scrape included. The labels are those of the policy stage's decisions (three labels, a few
 * series), the kind of update every request makes several of.
 *
 *   npx tsx bench/metrics/counter-updates.ts
 *
 * The two take turns (BENCH_ROUNDS rounds, default 9, of 500 000 increments each); the median
 * round is printed, with the ratio of the kit to prom-client.
 */
import { Counter, Registry } from 'prom-client';
import { createMetricsKit } from '../../runtime/observability/metrics.ts';

const rounds = Number(process.env.BENCH_ROUNDS) > 0 ? Number(process.env.BENCH_ROUNDS) : 9;
const n = 500_000;
const labelNames = ['policy', 'rule', 'action'] as const;
const rules = ['none', 'deny-secrets', 'flag-injection', 'allow-listed'];

type Inc = (labels: Record<(typeof labelNames)[number], string>) => void;

function kitCounter(): { inc: Inc; read: () => Promise<string> } {
  const kit = createMetricsKit();
  const c = kit.counter({ name: 'bench_decisions_total', help: 'h', labelNames });
  return { inc: (l) => c.inc(l), read: () => kit.registry.metrics() };
}

function plainCounter(): { inc: Inc; read: () => Promise<string> } {
  const registry = new Registry();
  const c = new Counter({ name: 'bench_decisions_total', help: 'h', labelNames, registers: [registry] });
  return { inc: (l) => c.inc(l), read: () => registry.metrics() };
}

async function nsPerInc(make: () => { inc: Inc; read: () => Promise<string> }): Promise<number> {
  const { inc, read } = make();
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) inc({ policy: 'p', rule: rules[i & 3] as string, action: i & 1 ? 'allow' : 'flag' });
  await read();
  return Number(process.hrtime.bigint() - started) / n;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] as number;
const kit: number[] = [];
const plain: number[] = [];
for (let r = 0; r < rounds; r++) {
  if (r % 2) {
    kit.push(await nsPerInc(kitCounter));
    plain.push(await nsPerInc(plainCounter));
  } else {
    plain.push(await nsPerInc(plainCounter));
    kit.push(await nsPerInc(kitCounter));
  }
}
console.log(`prom-client Counter: ${median(plain).toFixed(0)} ns per inc(labels)`);
console.log(`metrics kit:         ${median(kit).toFixed(0)} ns per inc(labels)`);
console.log(`ratio kit / prom-client: ${(median(kit) / median(plain)).toFixed(2)}x (median of ${rounds} rounds)`);
