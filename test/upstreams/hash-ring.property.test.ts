/**
 * Consistent-hash balancing (balance: consistent-hash): the same key goes to the same endpoint
 * while the set is unchanged; an endpoint leaving moves only the keys it held; keys spread over
 * the endpoints by weight; requests without a key go round-robin.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HashRing } from '../../runtime/upstreams/hash-ring.ts';
import { ConsistentHash } from '../../runtime/upstreams/picker.ts';

const weightsArb = fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 2, maxLength: 6 });
const keysArb = fc.uniqueArray(fc.string({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 200 });
const none = () => 0;

describe('consistent-hash balancing', () => {
  it('the same key lands on the same endpoint while the set is unchanged (and across pickers built alike)', () => {
    fc.assert(
      fc.property(weightsArb, keysArb, (weights, keys) => {
        const all = weights.map((_, i) => i);
        const a = new ConsistentHash(weights);
        const b = new ConsistentHash(weights);
        for (const k of keys) {
          const first = a.pick(all, none, k);
          expect(a.pick(all, none, k)).toBe(first);
          expect(b.pick(all, none, k)).toBe(first);
        }
      }),
    );
  });

  it('an endpoint leaving moves only its own keys; the others stay where they were', () => {
    fc.assert(
      fc.property(weightsArb, keysArb, fc.nat(), (weights, keys, r) => {
        const all = weights.map((_, i) => i);
        const gone = r % weights.length;
        const rest = all.filter((i) => i !== gone);
        const p = new ConsistentHash(weights);
        for (const k of keys) {
          const before = p.pick(all, none, k);
          const after = p.pick(rest, none, k);
          expect(after).not.toBe(gone);
          if (before !== gone) expect(after).toBe(before);
        }
      }),
    );
  });

  it('spreads keys by weight (within a loose margin) and sends keyless requests round-robin', () => {
    const weights = [1, 2, 1];
    const ring = new HashRing(weights);
    const counts = [0, 0, 0];
    for (let n = 0; n < 20000; n++) counts[ring.lookup(`session-${n}`, () => true)]++;
    const total = weights.reduce((a, b) => a + b, 0);
    counts.forEach((c, i) => {
      const share = c / 20000;
      const expected = (weights[i] as number) / total;
      expect(Math.abs(share - expected)).toBeLessThan(0.06);
    });
    const p = new ConsistentHash([1, 1, 1]);
    expect([0, 1, 2, 3, 4, 5].map(() => p.pick([0, 1, 2], none))).toEqual([0, 1, 2, 0, 1, 2]);
  });
});
