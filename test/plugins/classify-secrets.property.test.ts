/**
 * Properties of the provider key detectors (key-formats.ts), on generated text:
 *
 * - a key generated from any format's pattern (checksum made valid), dropped into random prose,
 *   is found whole, by its provider's detector (or by a format with a longer literal prefix that
 *   the key also fits, as `sk-ant-…` is Anthropic's rather than the generic `sk-…`);
 * - placeholders in any format's shape (its prefix and a body of one repeated character, a
 *   sequence, `your_…_here`, `<…>`, `${…}`) are not flagged by the secrets classifier;
 * - pendingFrom: a text that ends inside a key is pending from at most the key's start, and a
 *   text ending in a blank has nothing pending.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { keyOf, rng } from '../../bench/detect/secrets-generate.ts';
import { DETECTORS } from '../../plugins/classify/patterns/catalog.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { type Detector, TextView } from '../../plugins/classify/patterns/detector.ts';
import { COMPILED } from '../../plugins/classify/patterns/key-detectors.ts';

const byId = new Map(DETECTORS.map((d) => [d.id, d] as const));
const WORDS = [
  'the',
  'deploy',
  'failed',
  'again',
  'see',
  'here',
  'ok',
  'merci',
  'bitte',
  'log',
  '42',
  'x',
  '—',
  'então',
];
const prose = fc.array(fc.constantFrom(...WORDS), { maxLength: 12 }).map((w) => w.join(' '));
const around = fc.constantFrom(' ', '\n', ' (', ' "', ': ', ' `', '\t', ' <');
const after = fc.constantFrom(' ', '\n', ')', '"', '.', ',', '`', '>', '');
const format = fc.constantFrom(...COMPILED);

describe('provider keys in prose', () => {
  it('a generated key of any format is found whole, by its provider’s detector', () => {
    fc.assert(
      fc.property(format, fc.nat(), prose, around, after, prose, (c, seed, before, open, close, rest) => {
        const key = keyOf(c, rng(seed));
        // A character the key may hold would go on it (`…W1.` then `.`): the key ends at a blank then.
        const end = c.pattern.chars.has(close) ? ' ' : close;
        const text = `${before}${open}${key}${end} ${rest}`;
        const at = before.length + open.length;
        const view = new TextView(text);
        const own = (byId.get(c.format.id) as Detector).find(view);
        if (own.some((f) => f.start === at && f.end === at + key.length)) return;
        // Or a more specific format's: a longer literal prefix that the key also fits.
        const other = COMPILED.find(
          (o) =>
            o.pattern.prefix.length > c.pattern.prefix.length &&
            (byId.get(o.format.id) as Detector).find(view).some((f) => f.start === at && f.end === at + key.length),
        );
        expect(other, `${c.format.id}: ${JSON.stringify(text)}`).toBeDefined();
      }),
      { numRuns: 2000 },
    );
  });

  it('placeholders in a format’s shape are not flagged', () => {
    const secrets = new PatternClassifier({ name: 's', type: 'pattern', detectors: ['secrets'] });
    const body = fc
      .tuple(fc.integer({ min: 8, max: 60 }), fc.constantFrom('X', 'x', '0', '*', 'a'))
      .map(([n, ch]) => ch.repeat(n));
    const sequence = fc
      .tuple(
        fc.integer({ min: 8, max: 60 }),
        fc.constantFrom('0123456789', 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'),
      )
      .map(([n, run]) => run.repeat(7).slice(0, n));
    const stand = fc.constantFrom(
      'your_api_key_here',
      '<your-token>',
      '${API_TOKEN}',
      'YOUR_SECRET_KEY',
      'REDACTED_REDACTED',
      '{{ token }}',
    );
    fc.assert(
      fc.property(format, fc.oneof(body, sequence, stand), prose, around, (c, filler, before, open) => {
        const text = `${before}${open}${c.pattern.prefix}${filler} ok`;
        const r = secrets.classifySync(text);
        expect(r.label, `${c.format.id}: ${JSON.stringify(text)}`).toBe('clean');
      }),
      { numRuns: 1500 },
    );
  });

  it('pendingFrom: a text ending inside a key is pending from the key’s start at the latest', () => {
    fc.assert(
      fc.property(format, fc.nat(), prose, fc.double({ min: 0, max: 1, noNaN: true }), (c, seed, before, share) => {
        const key = keyOf(c, rng(seed));
        const d = byId.get(c.format.id) as Detector;
        const start = before.length + 1;
        const cut = Math.max(1, Math.floor(key.length * share));
        const text = `${before} ${key.slice(0, cut)}`;
        const pending = d.pendingFrom?.(new TextView(text)) as number;
        if (cut < key.length) expect(pending, `${c.format.id}: ${JSON.stringify(text)}`).toBeLessThanOrEqual(start);
        expect(pending).toBeLessThanOrEqual(text.length);
        expect(d.pendingFrom?.(new TextView(`${text} `))).toBe(text.length + 1);
      }),
      { numRuns: 2000 },
    );
  });
});
