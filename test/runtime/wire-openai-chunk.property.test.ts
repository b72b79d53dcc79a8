/**
 * The OpenAI wire view reads the common chunk (one choice whose delta has only `content`) without
 * parsing its JSON (OpenAIChunk.contentOnly): for any event, what a reader gets — the text, the
 * JSON, the usage, and whether it is content only — is what a parse of the event gives. A stream
 * check trusts `contentOnly` and `text` to pass or hold a chunk, so a difference here would be a
 * leak.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkOf, openaiWire, type SseEvent } from '../../runtime/index.ts';

/** Strings with what JSON escapes: quotes, backslashes, control characters, surrogates, U+2028. */
const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom('', 'The ', 'a"b', 'c\\d', 'e\nf', '\u2028', '\ud83d\ude00', '\ud800', '</s>', '\u0000', '\t'),
);
const scalar = fc.oneof(
  text,
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
);
const key = fc.oneof(
  fc.constantFrom('id', 'object', 'created', 'model', 'system_fingerprint', 'usage', 'error', 'choices', 'obfuscation'),
  fc.string({ maxLength: 6 }),
);
/** A delta: content alone (the common one) or with other fields a chunk may carry. */
const delta = fc.oneof(
  text.map((content) => ({ content })),
  fc.record(
    {
      role: fc.constant('assistant'),
      content: fc.oneof(text, fc.constant(null)),
      refusal: text,
      tool_calls: fc.constant([{ index: 0, function: { arguments: '{"a":' } }]),
      reasoning_content: text,
    },
    { requiredKeys: [] },
  ),
);
const anyChoice = fc.record(
  {
    index: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2 })),
    delta,
    text,
    logprobs: fc.oneof(fc.constant(null), fc.constant({ content: [{ token: 'x', logprob: -1 }] })),
    finish_reason: fc.oneof(fc.constant(null), fc.constant('stop')),
  },
  { requiredKeys: ['delta'] },
);
/** The common choice (`logprobs` and `finish_reason` null or absent), or any. */
const choice = fc.oneof(
  fc.tuple(text, fc.boolean(), fc.boolean()).map(([content, logprobs, finish]) => ({
    index: 0,
    delta: { content },
    ...(logprobs ? { logprobs: null } : {}),
    ...(finish ? { finish_reason: null } : {}),
  })),
  anyChoice,
);
/** A chunk: members in any order, the usual ones and others (a second `choices`, an `error`, objects). */
const chunk = fc
  .tuple(
    fc.array(fc.tuple(key, fc.oneof(scalar, fc.constant({ total_tokens: 3 }))), { maxLength: 4 }),
    fc.oneof(fc.array(choice, { minLength: 1, maxLength: 2 }), fc.constant([])),
    fc.array(fc.tuple(key, scalar), { maxLength: 3 }),
  )
  .map(([before, choices, after]) => {
    // Written by hand so that duplicate keys stay in the text (JSON.parse keeps the last one).
    const member = ([k, v]: [string, unknown]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`;
    return `{${[...before.map(member), `"choices":${JSON.stringify(choices)}`, ...after.map(member)].join(',')}}`;
  });
/** The same data, sometimes written with blanks or unusual escapes (then it is parsed). */
const data = fc.oneof(
  chunk,
  chunk.map((d) => d.replace(/,"/g, ', "')),
  chunk.map((d) => d.replace(/"content":"/g, '"content":"\\u0041')),
  fc.constantFrom(
    '{"choices":[{"index":0,"delta":{"content":"x"}}],"choices":null}',
    '{"choices":[{"index":0,"delta":{"content":"x"}}],"error":"boom"}',
  ),
);

describe('the OpenAI wire view: a chunk read without parsing is the chunk parsed', () => {
  it('property: text, JSON, usage and contentOnly agree with JSON.parse', () => {
    let read = 0;
    fc.assert(
      fc.property(data, (raw) => {
        const parsed = JSON.parse(raw) as Record<string, unknown>;
        const c = chunkOf({ data: raw });
        expect(c).not.toBeNull();
        if (!c) return;
        expect(c.text).toBe(openaiWire.chunkText(parsed));
        expect(c.json).toEqual(parsed);
        const usage = parsed.usage;
        expect(c.usage).toEqual(
          typeof usage === 'object' && usage !== null && !Array.isArray(usage) ? usage : undefined,
        );
        if (c.contentOnly) {
          read++;
          // One choice whose delta is content alone, unfinished, and no other text in the chunk.
          const choices = parsed.choices as Array<Record<string, unknown>>;
          expect(choices).toHaveLength(1);
          expect(Object.keys(choices[0]?.delta as object)).toEqual(['content']);
          expect(choices[0]?.finish_reason ?? null).toBeNull();
          expect(choices[0]?.logprobs ?? null).toBeNull();
          expect(choices[0]?.text).toBeUndefined();
          expect(parsed.error).toBeUndefined();
        }
      }),
      { numRuns: 3000 },
    );
    // The property is not vacuous: many of the chunks were read without a parse.
    expect(read).toBeGreaterThan(25);
  });

  it('the common chunks of OpenAI-compatible backends are read without parsing; others are parsed', () => {
    const openai =
      '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello \\"you\\"\\n"},"logprobs":null,"finish_reason":null}]}';
    const vllm =
      '{"id":"cmpl-2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}],"usage":null}';
    for (const raw of [openai, vllm]) {
      const c = chunkOf({ data: raw });
      expect(c?.contentOnly).toBe(true);
      expect(c?.text).toBe(openaiWire.chunkText(JSON.parse(raw)));
    }
    expect(chunkOf({ data: openai })?.text).toBe('Hello "you"\n');
    for (const raw of [
      '{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
      '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
      '{"choices":[],"usage":{"total_tokens":3}}',
    ]) {
      expect(chunkOf({ data: raw })?.contentOnly).toBe(false);
    }
  });

  it('a long chunk (over 64 KiB) is parsed, with the same text: the expression is slower than JSON.parse there', () => {
    const content = 'Hello "you" '.repeat(10_000);
    const raw = `{"id":"c","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}`;
    expect(raw.length).toBeGreaterThan(64 * 1024);
    const c = chunkOf({ data: raw });
    expect(c?.contentOnly).toBe(false);
    expect(c?.text).toBe(content);
    expect(c?.json).toEqual(JSON.parse(raw));
    const short = raw.replace(JSON.stringify(content), '"Hello"');
    expect(chunkOf({ data: short })?.contentOnly).toBe(true);
  });

  it('an event is parsed once for every reader; a copy with other data is read anew', () => {
    const event: SseEvent = { data: '{"choices":[{"index":0,"delta":{"content":"a"}}]}' };
    const first = chunkOf(event);
    expect(chunkOf(event)).toBe(first);
    const copy = { ...event, data: '{"choices":[{"index":0,"delta":{"content":"b"}}]}' };
    expect(chunkOf(copy)?.text).toBe('b');
    expect(chunkOf(event)?.text).toBe('a');
    // What it keeps on the event is not part of it.
    expect(Object.keys(event)).toEqual(['data']);
    expect(JSON.stringify(event)).toBe(JSON.stringify({ data: event.data }));
    expect(chunkOf({ data: 'not json' })).toBeNull();
  });
});
