/**
 * The release point of every detector (Detector.pendingFrom), checked against its contract on
 * every prefix of generated texts: a finding of the whole text that starts before the release
 * point of a prefix is a finding of that prefix (as an open text: what a stream's check saw), and
 * a finding of the prefix before it is one of the whole text. So text a stream released (before
 * the release point) is never part of a later match, and nothing judged on it changes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DETECTORS } from '../../plugins/classify/patterns/catalog.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { type Detector, pendingOf, TextView } from '../../plugins/classify/patterns/detector.ts';
import { NamedClassifierSet } from '../../plugins/classify/set.ts';
import { SAMPLES, texts } from '../helpers/release-samples.ts';

const key = (f: { start: number; end: number; label: string }) => `${f.start}:${f.end}:${f.label}`;

/** Checks the contract of `d` on every prefix of `text` (its end closing it, as a stream's does). */
function checkPrefixes(d: Detector, text: string): void {
  // The closed whole text's findings, found once: what a later, complete check sees.
  const wholeFindings = d.find(new TextView(text));
  const whole = new Set(wholeFindings.map(key));
  for (let k = 0; k <= text.length; k++) {
    const prefix = new TextView(text.slice(0, k), true);
    const pending = pendingOf(d, prefix);
    const settledNow = d
      .find(prefix)
      .filter((f) => f.start < pending)
      .map(key)
      .sort();
    const settledLater = wholeFindings
      .filter((f) => f.start < pending)
      .map(key)
      .sort();
    // Compared plainly, and through expect (with its message) only when they differ: expect and
    // the label, per prefix, cost more than the detector itself (hundreds of thousands of prefixes).
    const holds =
      pending >= 0 &&
      pending <= k &&
      settledNow.length === settledLater.length &&
      settledNow.every((f, i) => f === settledLater[i] && whole.has(f));
    if (holds) continue;
    const label = JSON.stringify({ detector: d.id, text, k, pending });
    expect(pending, label).toBeGreaterThanOrEqual(0);
    expect(pending, label).toBeLessThanOrEqual(k);
    expect(settledNow, label).toEqual(settledLater);
    for (const f of settledNow) expect([...whole], label).toContain(f);
  }
}

describe('every detector releases only text no later match can touch', () => {
  it.each(DETECTORS.map((d) => [d.id, d] as const))('%s: on every prefix of generated texts', (_id, d) => {
    fc.assert(
      fc.property(texts, (text) => checkPrefixes(d, text)),
      { numRuns: 40 },
    );
  });

  it.each(DETECTORS.map((d) => [d.id, d] as const))('%s: on every prefix of each sample in prose', (_id, d) => {
    for (const s of SAMPLES) checkPrefixes(d, `Here it is: ${s} and more text follows.`);
  });

  it('the check catches a detector that releases too early', () => {
    const email = DETECTORS.find((x) => x.id === 'email') as Detector;
    const early: Detector = { ...email, pendingFrom: (view) => view.text.length };
    expect(() => checkPrefixes(early, 'Here it is: john.doe@example.com and more.')).toThrow(/"detector":"email"/);
    expect(() => checkPrefixes(email, 'Here it is: john.doe@example.com and more.')).not.toThrow();
  });

  it('ordinary prose holds at most its last word (detectors with a release point)', () => {
    const text = 'The weather report says it will be sunny with light winds along the coast';
    for (const d of DETECTORS.filter((x) => x.pendingFrom && ['pii', 'secrets'].includes(x.family))) {
      for (let k = 1; k <= text.length; k++) {
        const prefix = text.slice(0, k);
        // The last word, and the space after it (`AB 12 34 56 C`: a two-letter word may go on).
        const word = prefix.trimEnd().lastIndexOf(' ') + 1;
        expect(d.pendingFrom?.(new TextView(prefix, true)), `${d.id} at ${k}`).toBeGreaterThanOrEqual(word);
      }
    }
  });
});

describe('an open text through the classifier set', () => {
  const classifiers = () => [
    new PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] }),
    new PatternClassifier({ name: 'secrets', type: 'pattern', detectors: ['secrets'] }),
  ];
  it('carries the release point, at once, batched or not, and a cut-short bearer value waits', async () => {
    const text = `Authorization: Bearer ${'abcd'.repeat(75)}`;
    for (const set of [
      new NamedClassifierSet(classifiers()),
      new NamedClassifierSet(classifiers(), { batch: false }),
    ]) {
      for (const results of [
        set.classifySync(undefined, text, { open: true }),
        await set.classify(undefined, text, { open: true }),
      ]) {
        expect(results?.secrets.pendingFrom).toBe(text.indexOf('abcd'));
        expect(results?.secrets.score).toBe(0);
      }
      // Closed (the end of the answer): the value cut short is reported, as before.
      expect((await set.classify(undefined, text)).secrets.score).toBeGreaterThan(0.5);
    }
  });
});
