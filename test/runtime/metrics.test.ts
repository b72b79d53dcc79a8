/**
 * The metrics kit: counter and histogram updates are queued and applied in batches, and every
 * read sees all of them (prom-client runs `collect` before `get`); the in-flight gauge is read at
 * scrape time from the request core's count.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { Counter, Registry } from 'prom-client';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetricsKit, labelledSeries } from '../../runtime/observability/metrics.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { sample } from '../helpers/prometheus.ts';

describe('metrics kit: batched updates', () => {
  it('a read sees every queued update, with and without labels', async () => {
    const kit = createMetricsKit();
    const plain = kit.counter({ name: 't_plain_total', help: 'h' });
    const labelled = kit.counter({ name: 't_labelled_total', help: 'h', labelNames: ['kind'] as const });
    const hist = kit.histogram({ name: 't_seconds', help: 'h', labelNames: ['kind'] as const, buckets: [1, 10] });
    const bare = kit.histogram({ name: 't_bare_seconds', help: 'h', buckets: [1] });
    plain.inc();
    plain.inc(5);
    for (let i = 0; i < 300; i++) labelled.inc({ kind: i % 2 ? 'odd' : 'even' });
    labelled.inc({ kind: 'odd' }, 10);
    hist.observe({ kind: 'a' }, 0.5);
    hist.observe({ kind: 'a' }, 5);
    bare.observe(2);
    const text = await kit.registry.metrics();
    expect(sample(text, 't_plain_total ')).toBe(6);
    expect(sample(text, 't_labelled_total{kind="even"}')).toBe(150);
    expect(sample(text, 't_labelled_total{kind="odd"}')).toBe(160);
    expect(sample(text, 't_seconds_bucket{le="1",kind="a"}')).toBe(1);
    expect(sample(text, 't_seconds_count{kind="a"}')).toBe(2);
    expect(sample(text, 't_seconds_sum{kind="a"}')).toBe(5.5);
    expect(sample(text, 't_bare_seconds_count')).toBe(1);
    expect(sample(text, 't_bare_seconds_sum')).toBe(2);
    // A second read adds nothing twice.
    expect(sample(await kit.registry.metrics(), 't_plain_total ')).toBe(6);
  });

  it('children from labels() (kept by labelledSeries) count into the same series as label objects', async () => {
    const kit = createMetricsKit();
    const c = kit.counter({ name: 't_child_total', help: 'h', labelNames: ['route', 'status'] as const });
    const h = kit.histogram({ name: 't_child_seconds', help: 'h', labelNames: ['route'] as const, buckets: [1] });
    const counterOf = labelledSeries(c);
    const histogramOf = labelledSeries(h);
    expect(counterOf('a', '200')).toBe(counterOf('a', '200'));
    expect(counterOf('a', '200')).not.toBe(counterOf('a', '500'));
    for (let i = 0; i < 300; i++) counterOf('a', '200').inc();
    counterOf('a', '500').inc(2);
    c.inc({ route: 'a', status: '200' });
    c.labels({ route: 'b', status: '200' }).inc();
    histogramOf('a').observe(0.5);
    histogramOf('a').observe(3);
    h.observe({ route: 'a' }, 0.25);
    const text = await kit.registry.metrics();
    expect(sample(text, 't_child_total{route="a",status="200"}')).toBe(301);
    expect(sample(text, 't_child_total{route="a",status="500"}')).toBe(2);
    expect(sample(text, 't_child_total{route="b",status="200"}')).toBe(1);
    expect(sample(text, 't_child_seconds_count{route="a"}')).toBe(3);
    expect(sample(text, 't_child_seconds_bucket{le="1",route="a"}')).toBe(2);
    expect(sample(text, 't_child_seconds_sum{route="a"}')).toBe(3.75);
    // A counter child's increments are summed until a read: each read sees them once.
    for (let i = 0; i < 3; i++) counterOf('a', '200').inc();
    const again = await kit.registry.metrics();
    expect(sample(again, 't_child_total{route="a",status="200"}')).toBe(304);
    expect(sample(await kit.registry.metrics(), 't_child_total{route="a",status="200"}')).toBe(304);
  });

  it("what a metric's own collect adds is in the same read", async () => {
    const kit = createMetricsKit();
    let outside = 0;
    let counted = 0;
    kit.counter({
      name: 't_outside_total',
      help: 'h',
      collect() {
        this.inc(outside - counted);
        counted = outside;
      },
    });
    outside = 7;
    expect(sample(await kit.registry.metrics(), 't_outside_total ')).toBe(7);
  });

  it('a wrong label never throws at the caller: the update is dropped with a warning', async () => {
    const kit = createMetricsKit();
    const c = kit.counter({ name: 't_strict_total', help: 'h', labelNames: ['kind'] as const });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      expect(() => c.inc({ nope: 'x' } as never)).not.toThrow();
      c.inc({ kind: 'ok' });
      const text = await kit.registry.metrics();
      expect(sample(text, 't_strict_total{kind="ok"}')).toBe(1);
      await new Promise((r) => setImmediate(r));
      expect(warnings.some((m) => m.includes('t_strict_total') && m.includes('update dropped'))).toBe(true);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('metrics kit: a counter increments by label objects, summed per series until a read', () => {
  it('property: any increments, labels in any order, wrong ones too: the same text as a plain prom-client counter', async () => {
    const label = fc.constantFrom('a', 'b', 'c', 7);
    const labels = fc.oneof(
      fc.record({ route: label, status: label }),
      // the same series written in the other order
      fc.record({ status: label, route: label }),
      // a label the counter does not have, or one missing: prom-client refuses those
      fc.record({ route: label, nope: label }),
      fc.record({ route: label }),
    );
    const amount = fc.oneof(
      fc.constant(undefined),
      fc.integer({ min: 0, max: 5 }),
      fc.double({ min: 0, max: 10, noNaN: true }),
      fc.constantFrom(-1, Number.NaN, Number.POSITIVE_INFINITY),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(labels, amount), { maxLength: 600 }), async (incs) => {
        const kit = createMetricsKit();
        const batched = kit.counter({ name: 't_sum_total', help: 'h', labelNames: ['route', 'status'] as const });
        const registry = new Registry();
        const plain = new Counter({
          name: 't_sum_total',
          help: 'h',
          labelNames: ['route', 'status'],
          registers: [registry],
        });
        const onWarning = () => {};
        process.on('warning', onWarning);
        try {
          for (const [l, n] of incs) {
            batched.inc(l as never, n);
            try {
              plain.inc(l as never, n);
            } catch {
              // refused by prom-client: the kit drops it with a warning
            }
          }
          const got = await kit.registry.metrics();
          const want = await registry.metrics();
          const values = (text: string) =>
            text
              .split('\n')
              .filter((line) => line.startsWith('t_sum_total{'))
              .map((line) => {
                const [series = '', value] = line.split(' ');
                // The labels in one order: prom-client writes them in the order of the series' first update.
                const labels = series
                  .slice(series.indexOf('{') + 1, -1)
                  .split(',')
                  .sort()
                  .join(',');
                return [labels, Number(value)] as const;
              })
              .sort(([a], [b]) => (a < b ? -1 : 1));
          const a = values(got);
          const b = values(want);
          expect(a.map(([k]) => k)).toEqual(b.map(([k]) => k));
          // Summed before it is added: the same up to rounding of non-integer amounts.
          a.forEach(([, v], i) => {
            const w = b[i]?.[1] as number;
            // NaN and Infinity as prom-client keeps them (it takes both); else up to rounding.
            if (Number.isFinite(w)) expect(v).toBeCloseTo(w, 9);
            else expect(v).toBe(w);
          });
        } finally {
          process.off('warning', onWarning);
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('switchyard_requests_in_flight', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(join(import.meta.dirname, '../fixtures/ops.yaml'));
  });
  afterAll(() => svc?.close());

  it('counts a request while it is answered, and not after', async () => {
    const scrape = async () =>
      sample(await (await fetch(`${svc.metricsUrl}/metrics`)).text(), 'switchyard_requests_in_flight');
    expect(await scrape()).toBe(0);
    const slow = fetch(`${svc.url}/slow`).then((r) => r.arrayBuffer()); // waits 600 ms
    await new Promise((r) => setTimeout(r, 200));
    expect(await scrape()).toBe(1);
    await slow;
    expect(await scrape()).toBe(0);
  });
});
