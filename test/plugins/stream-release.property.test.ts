/**
 * The streamed egress check with the real Tier A classifiers and the shipped policy's egress rules
 * (secrets block, personal data masked), against the check of the whole answer: for every split of
 * a text into chunks (one character at a time, small and large chunks, chunks that cut a surrogate
 * pair), the client gets exactly what a non-streamed check would let out — the answer masked as the
 * whole answer is, or, when the whole answer is blocked, a block and none of the blocked values.
 * A clean answer (a JWT-like run, a bearer value, a certificate, an unfinished BEGIN line of
 * something else) is never ended as a block. The same with the classifiers' trigger tested per
 * chunk (the stream's own state: a stretch known to hold none, extended chunk by chunk) and the
 * windows without one asked only for the classifiers' release point.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ClassifierResult, redact } from '../../plugins/classify/api.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { streamCheck, type WindowVerdict } from '../../plugins/policy/stream-check.ts';
import { openaiWire, type SseEvent, type SseVerdict } from '../../runtime/index.ts';
import { PROSE, SAMPLES, texts } from '../helpers/release-samples.ts';

const pii = new PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] });
const secrets = new PatternClassifier({ name: 'secrets', type: 'pattern', detectors: ['secrets'] });
/** The derived bound: the longest span of the egress classifiers. */
const HOLDBACK = Math.max(pii.maxSpanChars, secrets.maxSpanChars);

/** The shipped policy's egress rules: secrets ≥ 0.5 block, pii ≥ 0.5 redact. */
function decide(p: ClassifierResult, s: ClassifierResult): Omit<WindowVerdict, 'pendingFrom'> {
  if (s.score >= 0.5) return { decision: { action: 'block', rule: 'block-secrets-in-answer' }, spans: [] };
  if (p.score >= 0.5) return { decision: { action: 'redact', rule: 'redact-pii-in-answer' }, spans: p.spans };
  return { decision: { action: 'allow' }, spans: [] };
}

let scans = 0;
/** Release points asked alone (windows without a trigger). */
let asks = 0;
function releasePoint(text: string): number {
  asks++;
  return Math.min(pii.releasePoint(text), secrets.releasePoint(text));
}
function check(window: string, open = false, untriggered = false): WindowVerdict {
  scans++;
  const options = open || untriggered ? { open, untriggered } : undefined;
  const p = pii.classifySync(window, options);
  const s = secrets.classifySync(window, options);
  const verdict: WindowVerdict = decide(p, s);
  if (open) verdict.pendingFrom = Math.min(p.pendingFrom ?? 0, s.pendingFrom ?? 0);
  return verdict;
}

/** What the check of the whole answer lets out: the masked text, or undefined when it blocks. */
function whole(text: string): string | undefined {
  const { decision, spans } = decide(pii.classifySync(text), secrets.classifySync(text));
  if (decision.action === 'block') return undefined;
  return decision.action === 'redact' ? redact(text, spans) : text;
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  data: JSON.stringify({
    id: 'c1',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finish }],
  }),
});

interface Outcome {
  text: string;
  blocked: boolean;
  /** Text the client had after each upstream event. */
  progress: string[];
}

/** The egress classifiers' trigger, as the classifier set combines them. */
const TRIGGER = {
  reach: Math.max(pii.trigger?.reach ?? 0, secrets.trigger?.reach ?? 0),
  test: (text: string) => (pii.trigger?.test(text) ?? true) || (secrets.trigger?.test(text) ?? true),
};

async function stream(
  pieces: string[],
  holdbackChars = HOLDBACK,
  releaseEveryChars = 0,
  trigger?: typeof TRIGGER,
): Promise<Outcome> {
  const filter = streamCheck({
    trigger,
    // With the trigger, windows without one ask the classifiers' release point alone, as the
    // policy stage does once a clean window's rules allow (they do here).
    releasePoint: trigger ? releasePoint : undefined,
    windowChars: 512,
    scanEveryChars: 128,
    holdbackChars,
    openContextChars: 128, // as the policy stage sets it with Tier A classifiers only
    releaseEveryChars,
    check,
    decided: () => {},
    errorBody: () => ({ error: { type: 'safety_violation' } }),
    mask: (text, spans) => redact(text, spans),
  });
  const events: SseEvent[] = [
    chunk({ role: 'assistant', content: '' }),
    ...pieces.map((p) => chunk({ content: p })),
    chunk({}, 'stop'),
    { data: '[DONE]' },
  ];
  let text = '';
  let blocked = false;
  const progress: string[] = [];
  for (const event of events) {
    const verdict: SseVerdict = (await filter.onEvent(event)) ?? { events: [event] };
    for (const e of verdict.events) {
      if (e.data === '[DONE]') continue;
      const body = JSON.parse(e.data) as Record<string, unknown>;
      if (
        (body.choices as Array<{ finish_reason: string | null }> | undefined)?.[0]?.finish_reason === 'content_filter'
      )
        blocked = true;
      if (!body.error) text += openaiWire.chunkText(body);
    }
    progress.push(text);
    if (verdict.end) break;
  }
  return { text, blocked, progress };
}

/** A text cut at the given points (fractions), any code unit included (a surrogate pair too). */
function cut(text: string, points: number[]): string[] {
  const at = [...new Set(points.map((p) => Math.floor(p * text.length)))].sort((a, b) => a - b);
  const out: string[] = [];
  let from = 0;
  for (const p of [...at, text.length]) {
    if (p > from) out.push(text.slice(from, p));
    from = Math.max(from, p);
  }
  return out;
}
/** Where `part` starts in `text`, overlapping occurrences included. */
function occurrences(text: string, part: string): number[] {
  const out: number[] = [];
  for (let at = text.indexOf(part); at !== -1; at = text.indexOf(part, at + 1)) out.push(at);
  return out;
}
const ones = (text: string) => [...Array(text.length)].map((_, i) => text[i]);

async function agrees(text: string, pieces: string[], releaseEveryChars = 0, trigger?: typeof TRIGGER): Promise<void> {
  const expected = whole(text);
  const got = await stream(pieces, HOLDBACK, releaseEveryChars, trigger);
  const label = JSON.stringify({ text, pieces: pieces.length });
  if (expected === undefined) {
    expect(got.blocked, label).toBe(true);
    // None of what the whole check found reached the client: each of its texts appears in what was
    // sent no more often than it appears in the answer outside every span (`12345678-ZThe` is no
    // ID, the `12345678-Z` after it is).
    const spans = [...secrets.classifySync(text).spans, ...pii.classifySync(text).spans];
    for (const sp of spans) {
      const found = text.slice(sp.start, sp.end);
      const outside = occurrences(text, found).filter(
        (at) => !spans.some((o) => at < o.end && at + found.length > o.start),
      );
      expect(occurrences(got.text, found).length, `${label}: ${found}`).toBeLessThanOrEqual(outside.length);
    }
  } else {
    expect(got.blocked, label).toBe(false);
    expect(got.text, label).toBe(expected);
  }
}

const fraction = fc.double({ min: 0, max: 1, noNaN: true });

describe('streamed release against the whole-answer check (real detectors, shipped rules)', () => {
  it('property: random chunks, small and large', async () => {
    await fc.assert(
      fc.asyncProperty(texts, fc.array(fraction, { maxLength: 60 }), async (text, points) =>
        agrees(text, cut(text, points)),
      ),
      { numRuns: 300 },
    );
  });

  it('property: random chunks, released every 16 characters (release_every_chars)', async () => {
    await fc.assert(
      fc.asyncProperty(texts, fc.array(fraction, { maxLength: 60 }), async (text, points) =>
        agrees(text, cut(text, points), 16),
      ),
      { numRuns: 200 },
    );
  });

  it('property: one code unit at a time (surrogate pairs cut)', async () => {
    await fc.assert(
      fc.asyncProperty(texts, async (text) => agrees(text, ones(text))),
      // A counterexample CI found (of the test's own oracle: a match's text inside a longer word).
      {
        numRuns: 100,
        examples: [
          ['12345678-ZThe 12345678-Z😀 Authorization: Bearer wocQwkME~M8ME4A8grzqSKqCiR515gg~sYk4AcUIThe '],
          // A JWT-like run whose payload is not JSON, then a word glued to it (2026-11-30).
          [
            '-eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ4IYogQAwgQAwgQAwgr-D32uh8888888888888888.wgQAYo4IYo4IYo4IYo4jOme2uG_WOme2uG_WOm6iqtZThe The ',
          ],
        ],
      },
    );
  });

  it('every sample in prose, one character at a time and in 3-character drips', async () => {
    for (const s of SAMPLES) {
      const text = `Here it is 😀: ${s} and then more text follows.`;
      await agrees(text, ones(text));
      await agrees(
        text,
        cut(
          text,
          Array.from({ length: text.length / 3 }, (_, i) => (3 * i) / text.length),
        ),
      );
    }
  });

  it('clean text goes out as it comes: after each chunk, all but the last word', async () => {
    const text = 'The weather report says it will be sunny with light winds along the coast today. ';
    const { progress } = await stream(ones(text));
    // progress[0] is the role chunk; progress[i] follows the i-th character.
    for (let i = 1; i <= text.length; i++) {
      const seen = text.slice(0, i);
      const lastWord = seen.trimEnd().lastIndexOf(' ') + 1;
      expect(progress[i].length, seen).toBeGreaterThanOrEqual(lastWord);
    }
  });

  it('personal data in the first sentence: the text before it goes out without waiting for it', async () => {
    const text = 'Sure, write to jane.doe@example.org for the details of the order. ';
    const { progress } = await stream(ones(text));
    const at = text.indexOf('jane');
    expect(progress[at + 4]).toBe('Sure, write to ');
    expect(progress.at(-1)).toBe('Sure, write to [EMAIL] for the details of the order. ');
  });

  it('4-character deltas: a chunk cut by the start of an address waits one chunk, then its start goes out', async () => {
    const text = 'Sure, write to jane.doe@example.org for the details. ';
    const pieces = cut(
      text,
      Array.from({ length: text.length / 4 }, (_, i) => (4 * i) / text.length),
    );
    const { progress, text: got } = await stream(pieces);
    expect(pieces[3]).toBe('to j');
    expect(progress[4]).toBe('Sure, write '); // `to j` waits whole once
    expect(progress[5]).toBe('Sure, write to '); // then `to ` goes out, with no blank in `ane.`
    expect(progress[7]).toBe('Sure, write to ');
    expect(got).toBe('Sure, write to [EMAIL] for the details. ');
  });

  it('release_every_chars: after the first text, a check every 16 characters, not every chunk', async () => {
    const text = 'The weather report says it will be sunny with light winds along the coast today. '.repeat(20);
    const pieces = cut(
      text,
      Array.from({ length: text.length / 4 }, (_, i) => (4 * i) / text.length),
    );
    scans = 0;
    const got = await stream(pieces, HOLDBACK, 16);
    expect(got.text).toBe(text);
    expect(got.progress[1]).toBe('The '); // the first text at once
    expect(scans).toBeLessThanOrEqual(Math.ceil(text.length / 16) + 3);
  });

  it('a clean stream counts its scans per chunk, not per character held', async () => {
    scans = 0;
    const text = 'The weather report says it will be sunny with light winds along the coast today. '.repeat(20);
    const pieces = cut(
      text,
      Array.from({ length: text.length / 4 }, (_, i) => (4 * i) / text.length),
    );
    await stream(pieces);
    // One open scan per chunk, one at the finish.
    expect(scans).toBeLessThanOrEqual(pieces.length + 2);
  });
});

const isAscii = (s: string) => [...s].every((c) => c.charCodeAt(0) < 128);

describe('the trigger tested per chunk (incremental), against the whole-answer check', () => {
  /** ASCII texts (a character outside it always triggers): prose, values, passwords of letters. */
  const ascii = fc
    .array(
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...PROSE.filter((p) => isAscii(p))) },
        fc.constantFrom(...SAMPLES.filter((s) => isAscii(s))),
        fc.constantFrom(
          'my password is (Tr!ckyOne) ',
          'pwd Hello!World ',
          'Basic YWxhZGRpbjpvcGVuc2VzYW1l ',
          'Bearer aBcDeFgHiJkLmNoPqRsTuVwXyZ ',
          'a reallylongwordwithoutanyblank ',
        ),
      ),
      { minLength: 1, maxLength: 10 },
    )
    .map((parts) => parts.join(''));

  it('property: random chunks, small and large', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(ascii, texts), fc.array(fraction, { maxLength: 60 }), async (text, points) =>
        agrees(text, cut(text, points), 0, TRIGGER),
      ),
      { numRuns: 300 },
    );
  });

  it('property: one code unit at a time, and released every 16 characters', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(ascii, texts), async (text) => {
        await agrees(text, ones(text), 0, TRIGGER);
        await agrees(text, ones(text), 16, TRIGGER);
      }),
      { numRuns: 100 },
    );
  });

  it('every sample after clean prose, one character at a time and in 3-character drips', async () => {
    const prose = 'The weather report says it will be sunny with light winds along the coast. '.repeat(3);
    for (const s of [...SAMPLES, 'my password is (Tr!ckyOne)', 'Basic YWxhZGRpbjpvcGVuc2VzYW1l']) {
      const text = `${prose}Here it is: ${s} and then more text follows.`;
      await agrees(text, ones(text), 0, TRIGGER);
      await agrees(
        text,
        cut(
          text,
          Array.from({ length: text.length / 3 }, (_, i) => (3 * i) / text.length),
        ),
        0,
        TRIGGER,
      );
    }
  });

  it('prose without a trigger asks only release points, and a password after it is still masked or blocked', async () => {
    let untriggered = 0;
    const counting = {
      reach: TRIGGER.reach,
      test: (text: string) => {
        const hit = TRIGGER.test(text);
        if (!hit) untriggered++;
        return hit;
      },
    };
    const prose = 'The weather report says it will be sunny with light winds along the coast. '.repeat(4);
    scans = 0;
    asks = 0;
    const clean = await stream(ones(prose), HOLDBACK, 0, counting);
    expect(clean.text).toBe(prose);
    // Every check but the first ones (the window starts before the stretch is known) and the last,
    // and those are the release points alone.
    expect(scans + asks).toBeGreaterThan(40);
    expect(untriggered).toBeGreaterThanOrEqual(scans + asks - 2);
    expect(scans).toBeLessThanOrEqual(2);
    const text = `${prose}my password is (Tr!ckyOne) ok. `;
    expect(whole(text)).toBeUndefined(); // the shipped rules block a secret
    const got = await stream(ones(text), HOLDBACK, 0, counting);
    expect(got.blocked).toBe(true);
    expect(got.text).not.toContain('Tr!ckyOne');
  });

  it('text with a trigger in every sentence: a full check per 32 new characters, not per chunk, and the same text out', async () => {
    const mixed =
      'Call me on 020 7946 0958 or write to ops@example.org before 5 pm. The build id is 4411 and the ' +
      'token field stays empty: config key = value. Our plan for Q3: ship v2.1, then review. ';
    const text = mixed.repeat(10);
    const pieces = cut(
      text,
      Array.from({ length: text.length / 4 }, (_, i) => (4 * i) / text.length),
    );
    scans = 0;
    await agrees(text, pieces, 0, TRIGGER);
    // The first ones (nothing released yet) and the closing ones aside (~400 at every chunk before).
    expect(scans).toBeLessThanOrEqual(Math.ceil(text.length / 32) + 8);
  });

  it('an answer that ends in held text after masked spans is masked, not blocked as a late redaction', async () => {
    // The settled check at the end reads more context than the open ones: the spans masked before
    // it are still known (they were forgotten once out of an open check's text: a false block).
    const text = `${'Call me on 020 7946 0958 or write to ops@example.org before 5 pm. Our plan: ship v2.1, then review. '.repeat(6)}Thanks`;
    const pieces = cut(
      text,
      Array.from({ length: text.length / 4 }, (_, i) => (4 * i) / text.length),
    );
    await agrees(text, pieces, 0, TRIGGER);
    await agrees(text, pieces);
  });
});
