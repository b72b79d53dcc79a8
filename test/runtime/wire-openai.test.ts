/**
 * The OpenAI wire reader (runtime/wire/openai.ts): every field a model reads in a request, and
 * every field of an answer or a streamed chunk, is read and masked; nothing else is touched; a
 * streamed chunk's text and its per-field mapping agree to the offset.
 *
 * The properties build each body twice from the same random pieces: once with a marker in one
 * randomly chosen field (random part type and case, random nesting), once with the marker's
 * masked form. Masking the first must give exactly the second.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openaiWire } from '../../runtime/index.ts';

const { answerText, chunkText, jsonWalkLimits, mapChunkText, maskAnswer, maskRequest, requestText } = openaiWire;

const MARK = 'Q7MARKERZ';
const MASKED = '[M]';
const mask = (t: string) => t.replaceAll(MARK, MASKED);

type Json = Record<string, unknown>;
/** A body (or part of one) with `m` in one field. */
type Build<T = Json> = (m: string) => T;

const roundtrip = <T>(v: T): T => JSON.parse(JSON.stringify(v));

const text = fc.string({ maxLength: 10 });
/** The marker among random text. */
const wrap = fc.tuple(text, text).map(
  ([a, b]) =>
    (m: string) =>
      `${a}${m}${b}`,
);
/** Any part type, in any case: the reader must not care. */
const partType = fc.oneof(
  fc.constantFrom('text', 'TEXT', 'Text', 'input_text', 'INPUT_TEXT', 'refusal', 'image_url', 'output_text'),
  fc.string({ maxLength: 8 }),
);
const plainPart = fc.oneof(
  fc.record({ type: fc.constant('text'), text }),
  fc.record({
    type: fc.constant('image_url'),
    image_url: fc.record({ url: fc.constant('https://example.org/a.png') }),
  }),
);
const plainMessage = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: text }),
  fc.record({ role: fc.constant('user'), content: fc.array(plainPart, { maxLength: 2 }) }),
  fc.record({ role: fc.constant('tool'), tool_call_id: fc.constant('call_1'), content: text }),
);
const jsonLeaf = fc.jsonValue({ maxDepth: 1 });

/** Where, inside some JSON, to put a leaf: a random path of keys and array positions with siblings. */
const nesting = fc
  .array(
    fc.oneof(
      fc.record({
        key: fc.string({ maxLength: 6 }),
        siblings: fc.dictionary(fc.string({ maxLength: 6 }), jsonLeaf, { maxKeys: 2 }),
      }),
      fc.record({ before: fc.array(jsonLeaf, { maxLength: 2 }), after: fc.array(jsonLeaf, { maxLength: 2 }) }),
    ),
    { maxLength: 5 },
  )
  .map(
    (steps) => (leaf: unknown) =>
      steps.reduceRight<unknown>(
        (inner, s) => ('key' in s ? { ...s.siblings, [s.key]: inner } : [...s.before, inner, ...s.after]),
        leaf,
      ),
  );

/** JSON (a schema, JSON arguments) with the marker in a string value or in a key, at some depth. */
const nestedJson: fc.Arbitrary<Build<unknown>> = fc.oneof(
  fc.tuple(nesting, wrap).map(
    ([at, w]) =>
      (m: string) =>
        at(w(m)),
  ),
  fc.tuple(nesting, wrap, jsonLeaf).map(
    ([at, w, v]) =>
      (m: string) =>
        at({ [w(m)]: v }),
  ),
);

/** The marker in one field of a message or `delta` (string fields only: answers and chunks). */
const messageField = (role: string): fc.Arbitrary<Build> =>
  fc.oneof(
    wrap.map((w) => (m: string) => ({ role, content: w(m) })),
    fc
      .tuple(partType, wrap, fc.array(plainPart, { maxLength: 2 }), fc.constantFrom('text', 'refusal'))
      .map(([type, w, others, field]) => (m: string) => ({ role, content: [...others, { type, [field]: w(m) }] })),
    wrap.map((w) => (m: string) => ({ role, content: 'hello', name: w(m) })),
    wrap.map((w) => (m: string) => ({ role, content: null, refusal: w(m) })),
    fc.tuple(wrap, fc.constantFrom('reasoning_content', 'reasoning')).map(([w, f]) => (m: string) => ({
      role,
      content: '',
      [f]: w(m),
    })),
    fc
      .tuple(wrap, fc.constantFrom('name', 'arguments'), partType, fc.nat(2))
      .map(([w, f, type, before]) => (m: string) => ({
        role,
        content: null,
        tool_calls: [
          ...Array.from({ length: before }, (_, i) => ({
            id: `call_${i}`,
            type: 'function',
            function: { name: 'lookup', arguments: '{"q":"weather"}' },
          })),
          {
            id: 'call_x',
            type,
            function: { name: 'search', arguments: '{}', [f]: w(m) },
          },
        ],
      })),
    fc.tuple(wrap, fc.constantFrom('name', 'input')).map(([w, f]) => (m: string) => ({
      role,
      content: null,
      tool_calls: [{ id: 'call_c', type: 'custom', custom: { name: 'run', input: 'ls', [f]: w(m) } }],
    })),
    fc.tuple(wrap, fc.constantFrom('name', 'arguments')).map(([w, f]) => (m: string) => ({
      role,
      content: null,
      function_call: { name: 'legacy', arguments: '{}', [f]: w(m) },
    })),
    wrap.map((w) => (m: string) => ({ role, content: null, audio: { id: 'audio_1', transcript: w(m) } })),
  );

/** The marker in one field of a request (the list of docs/safety-filter.md). */
const requestSite: fc.Arbitrary<{ message?: Build; top?: Build }> = fc.oneof(
  {
    // Message fields are many: weighted so that each is drawn about as often as a top-level field.
    weight: 10,
    arbitrary: fc
      .constantFrom('system', 'user', 'assistant', 'tool', 'developer')
      .chain((role) => messageField(role).map((message) => ({ message }))),
  },
  // JSON arguments (not a string) are read whole.
  fc.tuple(nestedJson, fc.constantFrom('tool_calls', 'function_call')).map(([args, where]) => ({
    message: (m: string) =>
      where === 'tool_calls'
        ? {
            role: 'assistant',
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args(m) } }],
          }
        : { role: 'assistant', function_call: { name: 'f', arguments: args(m) } },
  })),
  wrap.map((w) => ({ top: (m: string) => ({ prompt: w(m) }) })),
  fc
    .tuple(wrap, fc.array(text, { maxLength: 2 }), fc.array(text, { maxLength: 2 }))
    .map(([w, a, b]) => ({ top: (m: string) => ({ prompt: [...a, w(m), ...b] }) })),
  wrap.map((w) => ({ top: (m: string) => ({ prompt: 'def f(', suffix: w(m) }) })),
  fc.tuple(wrap, fc.boolean(), partType).map(([w, parts, type]) => ({
    top: (m: string) => ({ prediction: { type: 'content', content: parts ? [{ type, text: w(m) }] : w(m) } }),
  })),
  fc.tuple(wrap, fc.constantFrom('name', 'description'), partType).map(([w, f, type]) => ({
    top: (m: string) => ({
      tools: [{ type, function: { name: 'get_weather', description: 'Weather.', parameters: {}, [f]: w(m) } }],
    }),
  })),
  fc.tuple(nestedJson, partType).map(([schema, type]) => ({
    top: (m: string) => ({ tools: [{ type, function: { name: 'f', parameters: schema(m) } }] }),
  })),
  fc.tuple(wrap, fc.constantFrom('name', 'description')).map(([w, f]) => ({
    top: (m: string) => ({ tools: [{ type: 'custom', custom: { name: 'run', [f]: w(m) } }] }),
  })),
  nestedJson.map((format) => ({
    top: (m: string) => ({ tools: [{ type: 'custom', custom: { name: 'run', format: format(m) } }] }),
  })),
  fc.tuple(wrap, fc.constantFrom('name', 'description')).map(([w, f]) => ({
    top: (m: string) => ({ functions: [{ name: 'old', parameters: { type: 'object' }, [f]: w(m) }] }),
  })),
  nestedJson.map((schema) => ({ top: (m: string) => ({ functions: [{ name: 'old', parameters: schema(m) }] }) })),
  wrap.map((w) => ({
    top: (m: string) => ({
      response_format: { type: 'json_schema', json_schema: { name: 'out', description: w(m), schema: {} } },
    }),
  })),
  nestedJson.map((schema) => ({
    top: (m: string) => ({ response_format: { type: 'json_schema', json_schema: { name: 'out', schema: schema(m) } } }),
  })),
);

const requestBody: fc.Arbitrary<Build> = fc
  .tuple(fc.array(plainMessage, { maxLength: 3 }), fc.array(plainMessage, { maxLength: 2 }), requestSite)
  .map(([before, after, site]) => (m: string) => ({
    model: 'gpt-4o-mini',
    messages: [...before, ...(site.message ? [site.message(m)] : []), ...after],
    ...(site.top ? site.top(m) : {}),
  }));

/** The marker in a field nothing reads: ids, roles, the model, URLs, parameters, metadata. */
const unreadBody: fc.Arbitrary<Build> = fc
  .tuple(wrap, fc.constantFrom('model', 'role', 'tool_call_id', 'url', 'metadata', 'tool_choice', 'stop', 'user'))
  .map(([w, where]) => (m: string) => {
    const v = w(m);
    return {
      model: where === 'model' ? v : 'gpt-4o-mini',
      messages: [
        {
          role: where === 'role' ? v : 'user',
          content: [{ type: 'image_url', image_url: { url: where === 'url' ? v : 'u' } }],
        },
        { role: 'tool', tool_call_id: where === 'tool_call_id' ? v : 'c1', content: 'ok' },
      ],
      ...(where === 'metadata' ? { metadata: { note: v } } : {}),
      ...(where === 'tool_choice' ? { tool_choice: { type: 'function', function: { name: v } } } : {}),
      ...(where === 'stop' ? { stop: [v] } : {}),
      ...(where === 'user' ? { user: v } : {}),
    };
  });

describe('requests', () => {
  it('property: a marker in any field a model reads is in requestText, and maskRequest removes it and only it', async () => {
    await fc.assert(
      fc.asyncProperty(requestBody, async (build) => {
        const body = roundtrip(build(MARK));
        expect(requestText(body)).toContain(MARK);
        expect(await maskRequest(body, mask)).toBe(true);
        expect(body).toEqual(roundtrip(build(MASKED)));
        expect(JSON.stringify(body)).not.toContain(MARK);
        expect(requestText(body)).not.toContain(MARK);
      }),
      { numRuns: 400 },
    );
  });

  it('property: fields a model does not read are neither read nor rewritten', async () => {
    await fc.assert(
      fc.asyncProperty(unreadBody, async (build) => {
        const body = roundtrip(build(MARK));
        expect(requestText(body)).not.toContain(MARK);
        expect(await maskRequest(body, mask)).toBe(false);
        expect(body).toEqual(roundtrip(build(MARK)));
      }),
      { numRuns: 100 },
    );
  });

  it('reads the fields in the documented order, joined by newlines, skipping empty ones', () => {
    const body = {
      model: 'm',
      messages: [
        { role: 'system', content: 'sys' },
        {
          role: 'user',
          name: 'ann',
          content: [
            { type: 'TEXT', text: 'one' },
            { type: 'image_url', image_url: {} },
          ],
        },
        {
          role: 'assistant',
          content: '',
          refusal: 'no',
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'fn', arguments: '{"a":1}' } }],
        },
      ],
      prompt: ['p1', 'p2'],
      suffix: 'suf',
      tools: [{ type: 'function', function: { name: 't', description: 'd', parameters: { type: 'object' } } }],
      functions: [{ name: 'old', description: 'od' }],
      response_format: { type: 'json_schema', json_schema: { name: 'r', description: 'rd', schema: { enum: ['x'] } } },
    };
    expect(requestText(body).split('\n')).toEqual([
      'sys',
      'one',
      'ann',
      'no',
      'fn',
      '{"a":1}',
      'p1',
      'p2',
      'suf',
      't',
      'd',
      'type',
      'object',
      'old',
      'od',
      'r',
      'rd',
      'enum',
      'x',
    ]);
  });

  it('reads text parts among images, and the legacy prompt without its token ids', () => {
    const body = {
      model: 'm',
      messages: [
        { role: 'system', content: 'You are helpful.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'first part' },
            { type: 'image_url', image_url: { url: 'https://x/y.png' } },
            { type: 'text', text: 'second part' },
          ],
        },
        { role: 'assistant', content: null, tool_calls: [] },
      ],
    };
    expect(requestText(body)).toBe('You are helpful.\nfirst part\nsecond part');
    expect(requestText({ model: 'm', prompt: 'Say hi' })).toBe('Say hi');
    expect(requestText({ prompt: ['one', 'two', [1, 2, 3]] })).toBe('one\ntwo');
    expect(requestText({ model: 'm', input: 'embed me' })).toBe('');
  });

  it('is total: any value gives a string, bodies that are not objects give nothing', () => {
    expect(requestText(null)).toBe('');
    expect(requestText('hello')).toBe('');
    expect(requestText([{ content: 'x' }])).toBe('');
    expect(requestText({ messages: 'not an array', prompt: [1, 2, 3] })).toBe('');
    expect(requestText({ messages: [null, 5, { content: 7 }, { content: [null, { type: 'text', text: 3 }] }] })).toBe(
      '',
    );
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(typeof requestText(v)).toBe('string');
      }),
      { numRuns: 200 },
    );
  });

  it('a mask runs once per field, all before any field is written', async () => {
    const body = {
      messages: [{ role: 'user', content: 'a' }],
      suffix: 'b',
      tools: [{ function: { description: 'c' } }],
    };
    const seen: string[] = [];
    const changed = await maskRequest(body, async (t) => {
      seen.push(t);
      await new Promise((r) => setImmediate(r));
      return t.toUpperCase();
    });
    expect(changed).toBe(true);
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(body).toEqual({
      messages: [{ role: 'user', content: 'A' }],
      suffix: 'B',
      tools: [{ function: { description: 'C' } }],
    });
  });

  it('renames a masked key in place, keeping the order of the keys and a "__proto__" key a plain key', async () => {
    const body = JSON.parse(
      `{"tools":[{"function":{"parameters":{"first":1,"mail ${MARK}":{"type":"string"},"__proto__":"x","last":2}}}]}`,
    );
    expect(await maskRequest(body, mask)).toBe(true);
    const params = body.tools[0].function.parameters;
    expect(Object.keys(params)).toEqual(['first', `mail ${MASKED}`, '__proto__', 'last']);
    expect(params[`mail ${MASKED}`]).toEqual({ type: 'string' });
    expect(Object.getPrototypeOf(params)).toBe(Object.prototype);
  });

  describe('bounded walk of arbitrary JSON', () => {
    const deep = (levels: number, leaf: unknown): unknown => {
      let v = leaf;
      for (let i = 0; i < levels; i++) v = { p: v };
      return v;
    };

    it('JSON deeper than the bound is still read and masked, as its JSON text', async () => {
      const body = { tools: [{ function: { name: 'f', parameters: deep(jsonWalkLimits.depth + 10, `x ${MARK}`) } }] };
      const text = requestText(body);
      expect(text).toContain(MARK);
      // The part beyond the bound comes as one JSON text.
      expect(text).toContain(`{"p":{"p":`);
      expect(await maskRequest(body, mask)).toBe(true);
      expect(body).toEqual({
        tools: [{ function: { name: 'f', parameters: deep(jsonWalkLimits.depth + 10, `x ${MASKED}`) } }],
      });
    });

    it('more entries than the bound: what is over it is read as JSON text and masked', async () => {
      const many = Array.from({ length: jsonWalkLimits.entries + 5 }, (_, i) => `v${i}`);
      many[many.length - 1] = `a@b ${MARK}`;
      const body = { tools: [{ function: { name: 'f', parameters: { enum: many } } }] };
      const text = requestText(body);
      expect(text).toContain(`"v0","v1"`);
      expect(text).toContain(MARK);
      expect(await maskRequest(body, mask)).toBe(true);
      expect(body.tools[0].function.parameters.enum.at(-1)).toBe(`a@b ${MASKED}`);
      expect(body.tools[0].function.parameters.enum.length).toBe(jsonWalkLimits.entries + 5);
    });

    it('masking that breaks the JSON text of an over-bound part leaves the masked text in its place', async () => {
      const body = { functions: [{ name: 'f', parameters: deep(jsonWalkLimits.depth + 1, 'secret') }] };
      expect(await maskRequest(body, (t) => t.replace('"secret"', '[REDACTED'))).toBe(true);
      const text = JSON.stringify(body);
      expect(text).not.toContain('secret');
      expect(text).toContain('[REDACTED');
    });

    it('a hostile schema (thousands of objects of 100 properties) is read with work proportional to its size', () => {
      // Work counted, not timed: every property read, key listing and descriptor lookup the walk
      // (and JSON.stringify beyond its bound) makes on the body goes through a counting proxy.
      let touched = 0;
      const touch = () => {
        touched += 1;
      };
      const counted = <T extends object>(o: T): T =>
        new Proxy(o, {
          get: (t, k, r) => {
            touch();
            return Reflect.get(t, k, r);
          },
          ownKeys: (t) => {
            touch();
            return Reflect.ownKeys(t);
          },
          getOwnPropertyDescriptor: (t, k) => {
            touch();
            return Reflect.getOwnPropertyDescriptor(t, k);
          },
        });
      const read = (n: number) => {
        const objects = Array.from({ length: n }, (_, i) => {
          const o: Json = {};
          for (let k = 0; k < 100; k++) o[`k${k}`] = `v${i}`;
          return counted(o);
        });
        const body = { tools: [{ function: { name: 'f', parameters: { anyOf: counted(objects) } } }] };
        touched = 0;
        const text = requestText(body);
        // Every value is read: walked within the bound, as JSON text beyond it.
        expect(text).toContain('v0');
        expect(text).toContain(`"k99":"v${n - 1}"`);
        return touched;
      };
      const small = read(1_000);
      const large = read(2_000);
      // Linear: twice the body, about twice the work (a quadratic walk would be four times).
      expect(large).toBeGreaterThan(small);
      expect(large).toBeLessThanOrEqual(small * 2.2);
    });
  });
});

/** The marker in one field of an answer (`message`) or a chunk (`delta`), or of the error body. */
const answerSite = (field: 'message' | 'delta'): fc.Arbitrary<Build> =>
  fc.oneof(
    fc.tuple(messageField('assistant'), fc.nat(1), fc.nat(1)).map(([msg, before, after]) => (m: string) => ({
      choices: [
        ...Array.from({ length: before }, (_, i) => ({ index: i, [field]: { content: 'clean' } })),
        { index: before, [field]: msg(m), finish_reason: null },
        ...Array.from({ length: after }, (_, i) => ({ index: before + 1 + i, [field]: { content: '' } })),
      ],
    })),
    wrap.map((w) => (m: string) => ({ object: 'text_completion', choices: [{ index: 0, text: w(m) }] })),
    wrap.map((w) => (m: string) => ({ error: { message: w(m), type: 'server_error', code: null } })),
    wrap.map((w) => (m: string) => ({ error: w(m) })),
  );

/** Whole answers may also carry arguments as JSON rather than a string (some OpenAI-compatible servers). */
const wholeAnswerSite: fc.Arbitrary<Build> = fc.oneof(
  { weight: 4, arbitrary: answerSite('message') },
  nestedJson.map((args) => (m: string) => ({
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args(m) } }],
        },
      },
    ],
  })),
);

describe('whole answers', () => {
  it('property: a marker in any answer field is in answerText, and maskAnswer removes it and only it', async () => {
    await fc.assert(
      fc.asyncProperty(wholeAnswerSite, async (build) => {
        const body = roundtrip({ id: 'chatcmpl-1', object: 'chat.completion', ...build(MARK) });
        expect(answerText(body)).toContain(MARK);
        expect(await maskAnswer(body, mask)).toBe(true);
        expect(body).toEqual(roundtrip({ id: 'chatcmpl-1', object: 'chat.completion', ...build(MASKED) }));
        expect(JSON.stringify(body)).not.toContain(MARK);
      }),
      { numRuns: 300 },
    );
  });

  it('reads content, refusal and tool calls of every choice, joined by newlines', () => {
    const body = {
      choices: [
        { message: { role: 'assistant', content: 'hi', refusal: null } },
        {
          message: {
            role: 'assistant',
            content: null,
            refusal: 'I cannot',
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"k":"v"}' } }],
          },
        },
      ],
      usage: { prompt_tokens: 1 },
    };
    expect(answerText(body)).toBe('hi\nI cannot\nf\n{"k":"v"}');
    expect(answerText({ data: [{ embedding: [1, 2] }] })).toBe('');
  });
});

/** Chunks as a backend streams them: the common shape most of all. */
const commonChunk = fc.tuple(text, fc.boolean()).map(([t, role]) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  choices: [
    { index: 0, delta: role ? { role: 'assistant', content: t } : { content: t }, logprobs: null, finish_reason: null },
  ],
}));
const toolCallChunk = fc.tuple(text, fc.option(text)).map(([args, name]) => ({
  object: 'chat.completion.chunk',
  choices: [
    {
      index: 0,
      delta: {
        tool_calls: [
          {
            index: 0,
            ...(name !== null ? { id: 'c', type: 'function' } : {}),
            function: { ...(name !== null ? { name } : {}), arguments: args },
          },
        ],
      },
    },
  ],
}));
const anyChunk: fc.Arbitrary<Json> = fc.oneof(
  commonChunk,
  toolCallChunk,
  answerSite('delta').map((b) => roundtrip(b(MARK))),
  fc.dictionary(fc.constantFrom('choices', 'error', 'id', 'x'), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 3 }),
  fc.record({
    choices: fc.array(
      fc.dictionary(fc.constantFrom('delta', 'message', 'text', 'index'), fc.jsonValue({ maxDepth: 4 }), {
        maxKeys: 4,
      }),
      { maxLength: 3 },
    ),
  }),
);

/** The fields mapChunkText hands out, with their offsets; checks the input is not changed. */
function fieldsOf(chunk: Json): { texts: string[]; offsets: number[]; mapped: Json } {
  const before = structuredClone(chunk);
  const texts: string[] = [];
  const offsets: number[] = [];
  const mapped = mapChunkText(chunk, (t, offset) => {
    texts.push(t);
    offsets.push(offset);
    return t;
  });
  expect(chunk).toEqual(before);
  return { texts, offsets, mapped };
}

describe('streamed chunks', () => {
  it('property: chunkText is the fields mapChunkText hands out, concatenated; offsets add up; identity gives an equal chunk', () => {
    fc.assert(
      fc.property(anyChunk, (chunk) => {
        const { texts, offsets, mapped } = fieldsOf(chunk);
        expect(texts.join('')).toBe(chunkText(chunk));
        let at = 0;
        for (let i = 0; i < texts.length; i++) {
          expect(offsets[i]).toBe(at);
          at += texts[i].length;
        }
        expect(mapped).toEqual(chunk);
        expect(mapped).not.toBe(chunk);
      }),
      { numRuns: 500 },
    );
  });

  it('property: a marker in any chunk field is in chunkText, and masking by offset removes it and only it', () => {
    fc.assert(
      fc.property(answerSite('delta'), (build) => {
        const chunk = roundtrip({ object: 'chat.completion.chunk', ...build(MARK) });
        const text = chunkText(chunk);
        expect(text).toContain(MARK);
        // Mask the marker's span of the chunk text, as the streamed check does: by offset.
        const start = text.indexOf(MARK);
        const masked = mapChunkText(chunk, (t, offset) =>
          offset <= start && start + MARK.length <= offset + t.length
            ? t.slice(0, start - offset) + MASKED + t.slice(start - offset + MARK.length)
            : t,
        );
        expect(masked).toEqual(roundtrip({ object: 'chat.completion.chunk', ...build(MASKED) }));
        expect(JSON.stringify(masked)).not.toContain(MARK);
        expect(JSON.stringify(chunk)).toContain(MARK);
      }),
      { numRuns: 300 },
    );
  });

  it('concatenates fields without separators, in the documented order', () => {
    const chunk = {
      choices: [
        {
          index: 0,
          delta: { content: 'a', refusal: 'b', tool_calls: [{ index: 0, function: { name: 'c', arguments: 'd' } }] },
        },
        { index: 1, text: 'e' },
      ],
      error: { message: 'f' },
    };
    expect(chunkText(chunk)).toBe('abcdef');
    expect(chunkText({ choices: [{ index: 0, delta: { content: 'plain' } }] })).toBe('plain');
    expect(chunkText({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })).toBe('');
    expect(chunkText({ choices: [], usage: { total_tokens: 3 } })).toBe('');
    expect(chunkText('data')).toBe('');
  });
});

describe('log probabilities', () => {
  const lp = (tokens: string[]) => ({
    content: tokens.map((token) => ({ token, logprob: -0.1, bytes: [...Buffer.from(token)], top_logprobs: [] })),
    refusal: null,
  });

  it('a whole answer reads the text they spell after the message; masking it removes them, and only then', async () => {
    const body = {
      choices: [
        { index: 0, message: { role: 'assistant', content: 'hi Q7' }, logprobs: lp(['hi ', 'Q7', 'MARK', 'ERZ']) },
        { index: 1, message: { role: 'assistant', content: 'clean' }, logprobs: lp(['cle', 'an']) },
      ],
    };
    expect(answerText(body)).toBe('hi Q7\nhi Q7MARKERZ\nclean\nclean');
    expect(await maskAnswer(body, mask)).toBe(true);
    expect(body.choices[0].logprobs).toBeNull();
    expect(body.choices[1].logprobs).toEqual(lp(['cle', 'an']));
  });

  it("the completions API's tokens and alternatives are read too", () => {
    const body = {
      choices: [
        {
          text: 'ab',
          logprobs: { tokens: ['a', 'b'], token_logprobs: [-1, -1], top_logprobs: [{ a: -1, Q7MARKERZ: -2 }] },
        },
      ],
    };
    expect(answerText(body)).toContain(MARK);
  });

  it('a chunk whose text is changed loses its log probabilities; an unchanged one keeps them', () => {
    const chunk = { choices: [{ index: 0, delta: { content: `x${MARK}` }, logprobs: lp(['x', MARK]) }] };
    expect(chunkText(chunk)).toBe(`x${MARK}`); // not read twice in a stream
    expect(mapChunkText(chunk, mask).choices).toEqual([{ index: 0, delta: { content: `x${MASKED}` }, logprobs: null }]);
    expect(mapChunkText(chunk, (t) => t)).toEqual(chunk);
  });
});
