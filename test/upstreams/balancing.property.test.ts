/**
 * The pickers and the outlier detector of balanced upstreams, on their own: weights shape the
 * rotation exactly, least-request prefers the less busy, ejections grow and respect the share cap.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EndpointHealth, OutlierDetector } from '../../runtime/upstreams/endpoint-health.ts';
import { LeastRequest, SmoothRoundRobin } from '../../runtime/upstreams/picker.ts';

const weightsArb = fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 8 });

describe('weighted round-robin', () => {
  it('over each cycle of sum(weights) picks, each endpoint is chosen exactly weight times', () => {
    fc.assert(
      fc.property(weightsArb, fc.integer({ min: 1, max: 4 }), (weights, cycles) => {
        const picker = new SmoothRoundRobin(weights);
        const all = weights.map((_, i) => i);
        const total = weights.reduce((a, b) => a + b, 0);
        for (let c = 0; c < cycles; c++) {
          const counts = weights.map(() => 0);
          for (let n = 0; n < total; n++) counts[picker.pick(all)]++;
          expect(counts).toEqual(weights);
        }
      }),
    );
  });

  it('never picks outside the candidates, and spreads a heavy endpoint (no run longer than its share needs)', () => {
    fc.assert(
      fc.property(weightsArb, fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }), (weights, mask) => {
        const candidates = weights.map((_, i) => i).filter((i) => mask[i]);
        fc.pre(candidates.length > 0);
        const picker = new SmoothRoundRobin(weights);
        for (let n = 0; n < 50; n++) expect(candidates).toContain(picker.pick(candidates));
      }),
    );
    // 5:1:1 is spread (a a b a c a a), not five in a row.
    const picker = new SmoothRoundRobin([5, 1, 1]);
    const seq = Array.from({ length: 7 }, () => picker.pick([0, 1, 2])).join('');
    expect(seq).not.toContain('00000');
  });
});

describe('least-request (power of two choices)', () => {
  it('of two endpoints, always the one with fewer requests under way per weight', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 50 }),
        fc.integer({ min: 0, max: 50 }),
        fc.double({ min: 0, max: 0.999 }),
        (a, b, r) => {
          fc.pre(a !== b);
          const picker = new LeastRequest([1, 1], () => r);
          const active = [a, b];
          expect(picker.pick([0, 1], (i) => active[i] as number)).toBe(a < b ? 0 : 1);
        },
      ),
    );
  });

  it('draws by weight: an idle heavy endpoint gets about its share', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const picker = new LeastRequest([8, 1, 1], random);
    const counts = [0, 0, 0];
    for (let n = 0; n < 3000; n++) counts[picker.pick([0, 1, 2], () => 0)]++;
    expect(counts[0]).toBeGreaterThan(counts[1] + counts[2]);
  });
});

describe('outlier ejection', () => {
  const config = { consecutive_failures: 3, base_ejection_ms: 100, max_ejection_ms: 350, max_ejected_share: 0.5 };

  it('ejects after N failures in a row, for base * 2^(k-1) capped at max; a success resets the count', () => {
    const endpoints = [new EndpointHealth(), new EndpointHealth()];
    const d = new OutlierDetector(config, endpoints);
    const e = endpoints[0] as EndpointHealth;
    let now = 1000;
    d.failure(e, now, false);
    d.failure(e, now, false);
    d.success(e);
    expect(d.failure(e, now, false)).toBe(false);
    expect(d.failure(e, now, false)).toBe(false);
    expect(d.failure(e, now, false)).toBe(true);
    const lengths = [e.ejectedUntil - now];
    for (let k = 0; k < 3; k++) {
      now = e.ejectedUntil;
      d.restore(e);
      for (let n = 0; n < 3; n++) d.failure(e, now, false);
      lengths.push(e.ejectedUntil - now);
    }
    expect(lengths).toEqual([100, 200, 350, 350]);
  });

  it('never ejects more than the share allows, whatever the order of failures', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        fc.array(fc.nat(7), { maxLength: 100 }),
        (n, share, failures) => {
          const endpoints = Array.from({ length: n }, () => new EndpointHealth());
          const d = new OutlierDetector({ ...config, consecutive_failures: 1, max_ejected_share: share }, endpoints);
          for (const f of failures) d.failure(endpoints[f % n] as EndpointHealth, 0, false);
          const out = endpoints.filter((e) => e.ejected(0)).length;
          expect(out).toBeLessThanOrEqual(Math.floor(share * n));
        },
      ),
    );
  });
});
