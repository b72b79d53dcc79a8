/**
 * The streamed egress check reads and masks every text field of a chunk (openaiWire.chunkText /
 * mapChunkText), not only `delta.content`: a tool call's streamed arguments, a refusal, a chunk
 * with several fields. Masking keeps each chunk's shape (ids, indexes, which field carries text);
 * with a hold-back, no e-mail address reaches the client whichever fields carry it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redact } from '../../plugins/classify/api.ts';
import { streamCheck, type WindowVerdict } from '../../plugins/policy/stream-check.ts';
import { openaiWire, type SseEvent, type SseVerdict } from '../../runtime/index.ts';

const { chunkText, mapChunkText } = openaiWire;
const email = /[a-z]+@example\.org/g;

function check(window: string): WindowVerdict {
  const spans = [...window.matchAll(email)].map((m) => ({
    start: m.index,
    end: m.index + m[0].length,
    label: 'EMAIL',
  }));
  return spans.length > 0
    ? { decision: { action: 'redact', rule: 'mask' }, spans }
    : { decision: { action: 'allow' }, spans: [] };
}

type Kind = 'content' | 'arguments' | 'refusal' | 'content+arguments';

/** A chunk carrying `piece` in the fields of `kind`. */
function chunkOf(kind: Kind, piece: string, split: number): Record<string, unknown> {
  const call = (args: string) => [{ index: 0, function: { arguments: args } }];
  const delta =
    kind === 'content'
      ? { content: piece }
      : kind === 'arguments'
        ? { tool_calls: call(piece) }
        : kind === 'refusal'
          ? { refusal: piece }
          : { content: piece.slice(0, split), tool_calls: call(piece.slice(split)) };
  return { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] };
}

/** The chunk with its text fields emptied: its shape. */
const shapeOf = (c: Record<string, unknown>) => mapChunkText(c, () => '');
/** Which fields carry text, by their order. */
const carrying = (c: Record<string, unknown>) => {
  const out: number[] = [];
  let i = 0;
  mapChunkText(c, (t) => {
    if (t !== '') out.push(i);
    i++;
    return t;
  });
  return out;
};

async function run(chunks: Record<string, unknown>[], holdbackChars: number) {
  const filter = streamCheck({
    windowChars: 256,
    scanEveryChars: 8,
    holdbackChars,
    check,
    decided: async () => {},
    errorBody: () => ({ error: { type: 'safety_violation' } }),
    mask: (text, spans) => redact(text, spans),
  });
  const out: SseEvent[] = [];
  let ended = false;
  for (const event of [...chunks.map((c) => ({ data: JSON.stringify(c) })), { data: '[DONE]' }]) {
    const verdict: SseVerdict = (await filter.onEvent(event)) ?? { events: [event] };
    out.push(...verdict.events);
    if (verdict.end) {
      ended = true;
      break;
    }
  }
  const parsed = out.filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data) as Record<string, unknown>);
  // A stream the check ended: its content_filter finish and error event are not answer chunks.
  return ended ? parsed.slice(0, -2) : parsed;
}

/** Runs the chunks; whether the check ended the stream early (as a block), and the answer chunks sent. */
async function runEnded(chunks: Record<string, unknown>[], holdbackChars: number) {
  const out = await run(chunks, holdbackChars);
  return { out, ended: out.length < chunks.length };
}

const words = fc.constantFrom('lorem ', 'ipsum ', 'dolor ', 'sit ', '{"to":"', '"}', 'x');
const answer = fc
  .tuple(fc.array(words, { maxLength: 12 }), fc.array(fc.constantFrom('jane', 'bob', 'ann'), { maxLength: 3 }))
  .map(([ws, names]) => {
    // Addresses between words: `names.length` of them.
    let text = ws.join('');
    for (const [i, n] of names.entries()) {
      const at = Math.floor(((i + 1) * text.length) / (names.length + 1));
      text = `${text.slice(0, at)} ${n}@example.org ${text.slice(at)}`;
    }
    return text;
  });
const pieces = fc.tuple(
  answer,
  fc.integer({ min: 1, max: 9 }),
  fc.array(fc.constantFrom<Kind>('content', 'arguments', 'refusal', 'content+arguments'), { minLength: 1 }),
  fc.nat(),
);
const chunked = pieces.map(([text, cut, kinds, seed]) => {
  const chunks: Record<string, unknown>[] = [];
  for (let i = 0, n = 0; i < text.length; i += cut, n++) {
    const piece = text.slice(i, i + cut);
    chunks.push(chunkOf(kinds[n % kinds.length], piece, (seed + n) % (piece.length + 1)));
  }
  return { text, chunks };
});

describe('streamed egress over every text field of a chunk', () => {
  for (const holdback of [0, 32]) {
    it(`property (hold-back ${holdback}): each chunk keeps its shape, and its text stays in the fields that had it`, async () => {
      await fc.assert(
        fc.asyncProperty(chunked, async ({ chunks }) => {
          const { out, ended } = await runEnded(chunks, holdback);
          // Without a hold-back, an address that started in text already sent ends the stream (a
          // block, never a silent leak); with one, every chunk goes out.
          if (holdback > 0) expect(ended).toBe(false);
          if (holdback === 0) {
            for (const [i, c] of out.entries()) {
              expect(shapeOf(c)).toEqual(shapeOf(chunks[i]));
              for (const f of carrying(c)) expect(carrying(chunks[i])).toContain(f);
            }
            return;
          }
          // Held chunks go out whole (masked where a span lies): every chunk has the shape of an
          // answer chunk and carries text only in fields that answer chunks of that shape carried.
          const shapes = new Map<string, Set<number>>();
          for (const c of chunks) {
            const key = JSON.stringify(shapeOf(c));
            const fields = shapes.get(key) ?? new Set<number>();
            for (const f of carrying(c)) fields.add(f);
            shapes.set(key, fields);
          }
          for (const c of out) {
            const fields = shapes.get(JSON.stringify(shapeOf(c)));
            expect(fields).toBeDefined();
            for (const f of carrying(c)) expect(fields?.has(f)).toBe(true);
          }
        }),
        { numRuns: 150 },
      );
    });
  }

  // With a hold-back, a tool call's deltas are held apart and checked as their own text (as a whole
  // answer's fields are), so the text runs through either text fields or a tool call's arguments.
  const oneKind = fc
    .tuple(
      answer,
      fc.integer({ min: 1, max: 9 }),
      fc.oneof(
        fc.array(fc.constantFrom<Kind>('content', 'refusal'), { minLength: 1 }),
        fc.constant<Kind[]>(['arguments']),
      ),
    )
    .map(([text, cut, kinds]) => {
      const chunks: Record<string, unknown>[] = [];
      for (let i = 0, n = 0; i < text.length; i += cut, n++)
        chunks.push(chunkOf(kinds[n % kinds.length], text.slice(i, i + cut), 0));
      return { text, chunks };
    });

  it('property (hold-back 32): no address reaches the client, whichever fields carry it', async () => {
    await fc.assert(
      fc.asyncProperty(oneKind, async ({ text, chunks }) => {
        const out = await run(chunks, 32);
        const received = out.map(chunkText).join('');
        expect(received).not.toMatch(email);
        expect(received).toBe(text.replace(email, '[EMAIL]'));
      }),
      { numRuns: 150 },
    );
  });

  it('property (hold-back 32, chunks up to 4x longer): a chunk straddling the release point waits, so nothing unchecked goes out', async () => {
    const big = fc.tuple(answer, fc.integer({ min: 1, max: 128 })).map(([text, cut]) => {
      const chunks: Record<string, unknown>[] = [];
      for (let i = 0; i < text.length; i += cut) chunks.push(chunkOf('content', text.slice(i, i + cut), 0));
      return { text, chunks };
    });
    await fc.assert(
      fc.asyncProperty(big, async ({ text, chunks }) => {
        const out = await run(chunks, 32);
        const received = out.map(chunkText).join('');
        expect(received).not.toMatch(email);
        expect(received).toBe(text.replace(email, '[EMAIL]'));
      }),
      { numRuns: 150 },
    );
  });

  it("without a hold-back, an address inside one chunk's tool-call arguments is masked there", async () => {
    const out = await run(
      [chunkOf('arguments', '{"to":"', 0), chunkOf('arguments', 'jane@example.org', 0), chunkOf('arguments', '"}', 0)],
      0,
    );
    expect(out.map(chunkText).join('')).toBe('{"to":"[EMAIL]"}');
    expect(out[1]).toEqual(chunkOf('arguments', '[EMAIL]', 0));
  });
});
