/**
 * The shortcuts a classifier takes on a stream's many small checks, against their contracts:
 *
 * - a detector's trigger (Detector.trigger): every ASCII text on which it finds anything, open or
 *   not, holds its trigger, so a text without any is skipped without missing a finding;
 * - a group's release point (Detector.group, the provider key formats): the least of its members'
 *   own, for any selection of them;
 * - end to end: a classifier taking both shortcuts answers exactly as the plain one (every
 *   detector searched the reference way), on every prefix (open) and on the whole text.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DETECTORS } from '../../plugins/classify/patterns/catalog.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { compileTrigger, type Detector, pendingOf, TextView } from '../../plugins/classify/patterns/detector.ts';
import { COMPILED } from '../../plugins/classify/patterns/key-detectors.ts';
import { SAMPLES, texts } from '../helpers/release-samples.ts';

const withTrigger = DETECTORS.filter((d) => d.trigger);
const corpus = ['pii', 'secrets'].flatMap((name) =>
  readFileSync(new URL(`../../bench/detect/${name}-sample.jsonl`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as { text: string }).text),
);
/** Letters and ASCII punctuation, the prose a trigger-free check is about (passwords without digits included). */
const asciiProse = fc
  .array(
    fc.oneof(
      fc.constantFrom('password is ', 'my pwd: ', 'Basic ', 'Bearer ', 'key ', 'token ', 'secret ', 'eyJ', ' ', '. '),
      fc.string({
        unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?\'"()*#%&;'),
        maxLength: 24,
      }),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(''));
/** Values without digits, `@`, `:` or `=` that a detector still finds (each needs its trigger). */
const LETTER_VALUES = [
  'my pwd is HelloWorld!x',
  'my password is (Tr!ckyOne)',
  'password Tr!cky.One?',
  'Basic YWxhZGRpbjpvcGVuc2VzYW1l',
  'Bearer aBcDeFgHiJkLmNoPqRsTuVwXyZ',
];
/** A key of every provider format, in prose. */
const formatKeys = fc
  .tuple(fc.constantFrom(...COMPILED), fc.nat(), fc.boolean(), fc.constantFrom('', 'the key ', 'token: ', '"'))
  .map(([c, seed, longest, before]) => {
    let x = seed;
    const pick = (n: number): number => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return (x >>> 8) % n;
    };
    const key = c.pattern.generate(pick, longest);
    return `${before}${c.format.fix ? c.format.fix(key) : key} and so on`;
  });

/** A finding of `d` on `text` (closed, and open on every prefix) implies its trigger. */
function checkTrigger(d: Detector, text: string): void {
  const trigger = compileTrigger([d]);
  const triggered = (t: string) => trigger?.test(t) as boolean;
  for (let k = 0; k <= text.length; k++) {
    const prefix = text.slice(0, k);
    for (const open of [true, false]) {
      if (d.find(new TextView(prefix, open)).length > 0) {
        expect(triggered(prefix), JSON.stringify({ detector: d.id, prefix, open })).toBe(true);
      }
    }
  }
}

describe('a detector finds nothing on an ASCII text without its trigger', () => {
  it.each(withTrigger.map((d) => [d.id, d] as const))('%s', (_id, d) => {
    fc.assert(
      fc.property(fc.oneof(texts, asciiProse, formatKeys), (text) => checkTrigger(d, text)),
      { numRuns: 30 },
    );
    for (const s of [...SAMPLES, ...LETTER_VALUES]) checkTrigger(d, `Here it is: ${s} and more.`);
  });

  it('on the detection corpora, every detector with a trigger', () => {
    const tests = withTrigger.map((d) => {
      const trigger = compileTrigger([d]);
      return [d, (t: string) => trigger?.test(t) as boolean] as const;
    });
    for (const text of corpus) {
      for (const [d, triggered] of tests) {
        if (d.find(new TextView(text)).length > 0) expect(triggered(text), `${d.id}: ${text}`).toBe(true);
      }
    }
  });

  it('the pii and secrets families all have one, and a character outside ASCII always triggers', () => {
    const egress = DETECTORS.filter((d) => d.family === 'pii' || d.family === 'secrets');
    expect(egress.filter((d) => !d.trigger).map((d) => d.id)).toEqual([]);
    const trigger = compileTrigger(egress);
    const test = (t: string) => trigger?.test(t) as boolean;
    expect(test('The quick brown fox jumps over the lazy dog. ')).toBe(false);
    for (const odd of ['\u212A', '\u017F', 'é', '😀', '\u00a0']) expect(test(`plain ${odd} words`)).toBe(true);
    expect(test('a run of sixteen')).toBe(false);
    expect(test('a runofsixteenchars')).toBe(true);
    expect(test('the PASSword')).toBe(true);
    // Each of these is found by some detector: the test must say so.
    for (const v of LETTER_VALUES) {
      expect(
        egress.some((d) => d.find(new TextView(v)).length > 0),
        v,
      ).toBe(true);
      expect(test(v), v).toBe(true);
    }
    expect(compileTrigger([...egress, DETECTORS.find((d) => !d.trigger) as Detector])).toBeUndefined();
  });
});

describe('a group releases as its members', () => {
  const groups = [...new Set(DETECTORS.flatMap((d) => (d.group ? [d.group] : [])))];
  it('there are groups: the key formats, the URL and the context credentials', () => {
    expect(groups.length).toBe(3);
    expect(DETECTORS.filter((d) => d.group === DETECTORS.find((k) => k.id === 'github_pat')?.group).length).toBe(
      COMPILED.length,
    );
  });
  it.each(groups.map((g, i) => [i, g] as const))(
    'group %i: the least of its members, for any selection',
    (_i, group) => {
      const members = DETECTORS.filter((d) => d.group === group);
      fc.assert(
        fc.property(fc.oneof(texts, asciiProse, formatKeys), fc.subarray(members, { minLength: 1 }), (text, some) => {
          const pending = group.pending(some);
          const all = group.pending(members);
          for (let k = 0; k <= text.length; k++) {
            const view = new TextView(text.slice(0, k), true);
            const least = (list: Detector[]) => Math.min(k, ...list.map((d) => pendingOf(d, view)));
            const [p, l, pa, la] = [pending(view), least(some), all(view), least(members)];
            // A group that finds nothing: no member does.
            const quiet = group.found(view) ? [] : members.filter((d) => d.find(view).length > 0);
            // Through expect (with its message) only when something differs: expect per member and
            // prefix cost more than the search itself.
            if (p === l && pa === la && quiet.length === 0) continue;
            expect(p, JSON.stringify({ text: text.slice(0, k) })).toBe(l);
            expect(pa).toBe(la);
            for (const d of quiet) expect(d.find(view), d.id).toEqual([]);
          }
        }),
        { numRuns: 60 },
      );
    },
  );
});

describe('with its shortcuts, a classifier answers as the plain one', () => {
  const pairs = ['pii', 'secrets'].map(
    (name) =>
      [
        new PatternClassifier({ name, type: 'pattern', detectors: [name] }),
        new PatternClassifier({ name, type: 'pattern', detectors: [name] }, { reference: true }),
      ] as const,
  );
  const same = (text: string, open: boolean) => {
    for (const [fast, plain] of pairs) {
      const options = open ? { open: true } : undefined;
      const { latency_ms: _a, ...a } = fast.classifySync(text, options);
      const { latency_ms: _b, ...b } = plain.classifySync(text, options);
      expect(a, JSON.stringify({ text, open })).toEqual(b);
    }
  };
  it('on every prefix of generated texts', () => {
    fc.assert(
      fc.property(fc.oneof(texts, asciiProse, formatKeys), (text) => {
        for (let k = 0; k <= text.length; k++) same(text.slice(0, k), true);
        same(text, false);
      }),
      { numRuns: 40 },
    );
  });
  it('on the detection corpora', () => {
    for (const text of corpus) {
      same(text, false);
      same(text, true);
    }
  });
});
