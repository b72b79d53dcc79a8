/**
 * The kit's histogram (runtime/observability/histogram.ts) against prom-client's Histogram fed the
 * same observations: the same text exposition, the same JSON (what a cluster primary sums), the
 * same sum of two registries; what prom-client refuses (a label the histogram does not have, a
 * value that is not a finite number) is dropped with a warning instead of thrown.
 */
import fc from 'fast-check';
import { AggregatorRegistry, Histogram as PromHistogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Histogram } from '../../runtime/observability/histogram.ts';
import { createMetricsKit, labelledSeries } from '../../runtime/observability/metrics.ts';

const buckets = [0.001, 0.01, 0.1, 1, 10];
type Op =
  | { kind: 'object'; labels: Record<string, string | number>; value: number }
  | { kind: 'child'; values: [string, string]; value: number };

const labelValue = fc.constantFrom('a', 'b', 7, '7');
const value = fc.oneof(
  fc.double({ min: 0, max: 20, noNaN: true }),
  fc.constantFrom(0, 0.001, 0.01, 1, 10, -1),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY),
);
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('object' as const),
    labels: fc.oneof(
      fc.record({ route: labelValue, method: labelValue }),
      fc.record({ method: labelValue, route: labelValue }),
      fc.record({ route: labelValue }),
      fc.record({ route: labelValue, nope: labelValue }),
    ),
    value,
  }),
  fc.record({
    kind: fc.constant('child' as const),
    values: fc.tuple(fc.constantFrom('a', 'b'), fc.constantFrom('GET', 'POST')),
    value,
  }),
);

/** Feeds both; a call prom-client refuses is skipped there (ours drops it with a warning). */
function feed(ops: Op[]) {
  const ours = new Registry();
  const theirs = new Registry();
  const h = new Histogram({ name: 't_seconds', help: 'h', labelNames: ['route', 'method'], buckets }, ours);
  const p = new PromHistogram({
    name: 't_seconds',
    help: 'h',
    labelNames: ['route', 'method'],
    buckets,
    registers: [theirs],
  });
  for (const o of ops) {
    if (o.kind === 'object') h.observe(o.labels as never, o.value);
    else h.labels(...o.values).observe(o.value);
    try {
      if (o.kind === 'object') p.observe(o.labels as never, o.value);
      else p.labels(...o.values).observe(o.value);
    } catch {
      // refused by prom-client
    }
  }
  return { ours, theirs };
}

/** Text lines in one order (series in first-seen order may differ once prom-client skips a call). */
const lines = (text: string) => text.split('\n').sort();

describe('the kit histogram against prom-client', () => {
  it('property: any observations, label orders, children, wrong ones: the same text and JSON', async () => {
    const onWarning = () => {};
    process.on('warning', onWarning);
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 300 }), async (ops) => {
          const { ours, theirs } = feed(ops);
          expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
          const json = async (r: Registry) =>
            JSON.stringify(await r.getMetricsAsJSON(), (_k, v) => (v === undefined ? null : v));
          expect(
            JSON.parse(await json(ours))[0].values.sort((x: object, y: object) =>
              JSON.stringify(x) < JSON.stringify(y) ? -1 : 1,
            ),
          ).toEqual(
            JSON.parse(await json(theirs))[0].values.sort((x: object, y: object) =>
              JSON.stringify(x) < JSON.stringify(y) ? -1 : 1,
            ),
          );
        }),
        { numRuns: 150 },
      );
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('two processes summed by a cluster primary: the same as two prom-client registries summed', async () => {
    const a = feed([{ kind: 'child', values: ['a', 'GET'], value: 0.005 }]);
    const b = feed([
      { kind: 'child', values: ['a', 'GET'], value: 0.5 },
      { kind: 'object', labels: { route: 'b', method: 'POST' }, value: 3 },
    ]);
    const summed = async (x: Registry, y: Registry) =>
      lines(await AggregatorRegistry.aggregate([await x.getMetricsAsJSON(), await y.getMetricsAsJSON()]).metrics());
    expect(await summed(a.ours, b.ours)).toEqual(await summed(a.theirs, b.theirs));
    expect((await summed(a.ours, b.ours)).join('\n')).toContain('t_seconds_count{route="a",method="GET"} 2');
  });

  it('without labels it shows its zero series from the start; reset empties it; a timer observes seconds', async () => {
    const kit = createMetricsKit();
    const h = kit.histogram({ name: 't_bare_seconds', help: 'h', buckets: [1] });
    expect(await kit.registry.metrics()).toContain('t_bare_seconds_count 0');
    const end = h.startTimer();
    const seconds = end();
    expect(seconds).toBeGreaterThanOrEqual(0);
    expect(await kit.registry.metrics()).toContain('t_bare_seconds_count 1');
    kit.registry.resetMetrics();
    expect(await kit.registry.metrics()).not.toContain('t_bare_seconds_count');
  });

  it('labelledSeries children and label objects count into one series; a second kit call finds the same metric', async () => {
    const kit = createMetricsKit();
    const spec = { name: 't_route_seconds', help: 'h', labelNames: ['route'] as const, buckets: [1] };
    const h = kit.histogram(spec);
    expect(kit.histogram(spec)).toBe(h);
    const of = labelledSeries(h);
    expect(of('a')).toBe(of('a'));
    of('a').observe(0.5);
    h.observe({ route: 'a' }, 2);
    const text = await kit.registry.metrics();
    expect(text).toContain('t_route_seconds_bucket{le="1",route="a"} 1');
    expect(text).toContain('t_route_seconds_count{route="a"} 2');
    expect(text).toContain('t_route_seconds_sum{route="a"} 2.5');
  });
});
