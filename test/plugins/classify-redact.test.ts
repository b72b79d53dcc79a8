/**
 * Redaction and span merging (the pieces policy and redaction stages reuse), with property tests: classification never throws, and its spans are in bounds, sorted
 * and disjoint whatever the input.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mergeSpans, redact, type Span } from '../../plugins/classify/api.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';

describe('redact', () => {
  it('replaces each span with a typed placeholder', () => {
    const text = 'mail a@b.io or call +44 20 7946 0958';
    const spans: Span[] = [
      { start: 5, end: 11, label: 'EMAIL' },
      { start: 20, end: 36, label: 'PHONE' },
    ];
    expect(redact(text, spans)).toBe('mail [EMAIL] or call [PHONE]');
    expect(redact(text, spans, (label) => `<${label.toLowerCase()}>`)).toBe('mail <email> or call <phone>');
  });

  it('merges overlapping spans into one placeholder, labelled by the widest part', () => {
    const text = '0123456789';
    expect(
      redact(text, [
        { start: 2, end: 6, label: 'A' },
        { start: 4, end: 9, label: 'B' },
      ]),
    ).toBe('01[B]9');
    expect(
      redact(text, [
        { start: 0, end: 8, label: 'WIDE' },
        { start: 1, end: 3, label: 'INNER' },
      ]),
    ).toBe('[WIDE]89');
  });

  it('keeps adjacent spans apart, ignores empty ones and clamps to the text', () => {
    expect(
      redact('abcdef', [
        { start: 0, end: 2, label: 'X' },
        { start: 2, end: 4, label: 'Y' },
        { start: 5, end: 5, label: 'EMPTY' },
        { start: 5, end: 99, label: 'Z' },
      ]),
    ).toBe('[X][Y]e[Z]');
    expect(redact('abc', [])).toBe('abc');
    expect(redact('abc', [{ start: -5, end: 1, label: 'L' }])).toBe('[L]bc');
  });

  it('works on the spans a classifier returns', () => {
    const c = new PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii', 'secrets'] });
    const text = 'Card 4111 1111 1111 1111, key AKIAZ7Q3K5M2N8P4R6T1, mail jane@example.org.';
    expect(redact(text, c.classifySync(text).spans)).toBe('Card [CREDIT_CARD], key [API_KEY], mail [EMAIL].');
  });
});

describe('properties', () => {
  const all = new PatternClassifier({
    name: 'all',
    type: 'pattern',
    detectors: ['pii', 'secrets', 'prompt_injection', 'jailbreak'],
  });
  // Fragments that make detectors start matching, so that random texts reach their edge cases.
  const fragment = fc.constantFrom(
    '@',
    '.',
    '-',
    ' ',
    '\n',
    '+',
    '(',
    ')',
    '0',
    '1',
    '4111',
    ' 1111',
    'DE89',
    '3704',
    'sk-',
    'ghp_',
    'AKIA',
    'eyJ',
    'hbGciOiJub25lIn0',
    '-----BEGIN PRIVATE KEY-----',
    '-----END PRIVATE KEY-----',
    'api_key=',
    'Bearer ',
    'ignore',
    'previous',
    'instructions',
    'i g n',
    '1gn0r3',
    'developer mode',
    'DAN',
    '\u200b',
    'о',
    'é',
    '😀',
  );
  const text = fc.oneof(
    fc.string({ maxLength: 300, unit: 'binary' }),
    fc.array(fc.oneof(fragment, fc.string({ maxLength: 6 })), { maxLength: 60 }).map((parts) => parts.join('')),
  );

  it('classify never throws; score and confidence in [0, 1]; spans in bounds, sorted, disjoint', async () => {
    await fc.assert(
      fc.asyncProperty(text, async (t) => {
        const r = await all.classify(t);
        expect(r.score).toBeGreaterThanOrEqual(0);
        expect(r.score).toBeLessThanOrEqual(1);
        expect(r.confidence).toBeGreaterThanOrEqual(0);
        expect(r.confidence).toBeLessThanOrEqual(1);
        let previousEnd = 0;
        for (const s of r.spans) {
          expect(s.start).toBeGreaterThanOrEqual(previousEnd);
          expect(s.end).toBeGreaterThan(s.start);
          expect(s.end).toBeLessThanOrEqual(t.length);
          previousEnd = s.end;
        }
      }),
      { numRuns: 400 },
    );
  });

  it('mergeSpans covers exactly the input spans (clamped), sorted and disjoint', () => {
    const span = fc.record({
      start: fc.integer({ min: -5, max: 60 }),
      end: fc.integer({ min: -5, max: 60 }),
      label: fc.constantFrom('A', 'B', 'C'),
    });
    fc.assert(
      fc.property(fc.array(span, { maxLength: 20 }), fc.integer({ min: 0, max: 50 }), (spans, length) => {
        const merged = mergeSpans(spans, length);
        const covered = (list: Span[]) => {
          const marks = new Array<boolean>(length).fill(false);
          for (const s of list) for (let i = Math.max(0, s.start); i < Math.min(length, s.end); i++) marks[i] = true;
          return marks;
        };
        expect(covered(merged)).toEqual(covered(spans));
        for (let i = 0; i < merged.length; i++) {
          expect(merged[i].start).toBeGreaterThanOrEqual(0);
          expect(merged[i].end).toBeLessThanOrEqual(length);
          expect(merged[i].end).toBeGreaterThan(merged[i].start);
          if (i > 0) expect(merged[i].start).toBeGreaterThanOrEqual(merged[i - 1].end);
        }
      }),
    );
  });

  it('redact keeps the text outside the spans, in order', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 40 }),
        fc.array(fc.tuple(fc.nat(45), fc.nat(45)), { maxLength: 6 }),
        (t, pairs) => {
          const spans = pairs.map(([a, b]) => ({ start: Math.min(a, b), end: Math.max(a, b), label: 'X' }));
          const out = redact(t, spans, () => '\u0000');
          const kept = out.split('\u0000').join('');
          const merged = mergeSpans(spans, t.length);
          let expected = '';
          let at = 0;
          for (const s of merged) {
            expected += t.slice(at, s.start);
            at = s.end;
          }
          expect(kept).toBe(expected + t.slice(at));
        },
      ),
    );
  });
});
