import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Chunker } from '../../plugins/chunker/api.ts';
import chunkResource from '../../plugins/chunker/index.ts';
import { GatewayError, type PluginEnv } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import {
  conceptWindow,
  numberedSentences,
  paragraphsAnswer,
  systemPrompt,
  userPrompt,
} from '../fixtures/ai-client/chunk-replies.ts';
import { startTruncatingLlm } from '../fixtures/ai-client/truncating-llm.ts';
import { type OpenAiBackend, type RecordedRequest, startOpenAiBackend } from '../helpers/openai-backend.ts';

const P1 =
  'Cats are small domesticated carnivores. They sleep for most of the day. Many people keep them as pets because they are independent.';
const P2 =
  'The Rhine is a major European river. It flows from the Swiss Alps to the North Sea. Barges carry goods along much of its length.';
const P3 =
  'Bread is made from flour, water and yeast. The dough rises before it is baked. A hot oven gives it a crisp crust.';
const TEXT = `${P1}\n\n${P2}\n\n  ${P3}\n`;
const API_KEY = 'sk-chunk-fixture-key';

/** What the fixture model answers; each test sets it. */
let reply: (request: RecordedRequest) => string = () => '{}';
let backend: OpenAiBackend;
let slow: OpenAiBackend;
beforeAll(async () => {
  backend = await startOpenAiBackend({ apiKey: API_KEY, reply: (r) => reply(r) });
  slow = await startOpenAiBackend({ firstTokenDelayMs: 1500, reply: (r) => paragraphsAnswer(r) });
});
afterAll(async () => {
  await backend?.close();
  await slow?.close();
});
beforeEach(() => {
  backend.requests.length = 0;
});

interface Made {
  chunker: Chunker;
  env: PluginEnv;
  logs: string[];
}

async function make(options: Record<string, unknown> = {}, llm: Record<string, unknown> = {}): Promise<Made> {
  const logs: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
  const env = createTestEnv({ logger });
  const instance = await chunkResource.create(
    { ...options, llm: { provider: 'custom', base_url: backend.url, model: 'gpt-4o-mini', api_key: API_KEY, ...llm } },
    env,
  );
  return { chunker: instance.value, env, logs };
}

async function fallbacks(env: PluginEnv): Promise<Record<string, number>> {
  const metric = env.metrics.registry.getSingleMetric('switchyard_chunk_fallbacks_total');
  const values = (await metric?.get())?.values ?? [];
  return Object.fromEntries(values.map((v) => [`${v.labels.type}/${v.labels.reason}`, v.value]));
}

/** The words chunker's answer for the same text, what every fallback must give. */
const byWords = (text: string, size: number) => {
  const words = text.trim().split(/\s+/);
  const out: string[] = [];
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(' '));
  return out;
};

/** Chunks with their inner whitespace collapsed, to compare with byWords. */
const collapsed = (chunks: string[]) => chunks.map((c) => c.split(/\s+/).join(' '));

describe('llm-concept', () => {
  it('returns the concepts as exact slices of the text, asking the model as documented', async () => {
    reply = paragraphsAnswer;
    const { chunker, env } = await make();
    expect(await chunker.chunk(TEXT, { type: 'llm-concept', size: 100 })).toEqual([P1, P2, P3]);
    expect(backend.requests).toHaveLength(1);
    const request = backend.requests[0];
    expect(request.path).toBe('/v1/chat/completions');
    expect(request.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request.body).toMatchObject({
      model: 'gpt-4o-mini',
      temperature: 0,
      max_tokens: 4096,
      response_format: { type: 'json_object' },
    });
    expect(systemPrompt(request)).toContain('A chunk has at most 100 words.');
    expect(conceptWindow(request)).toBe(TEXT.trim());
    expect(await fallbacks(env)).toEqual({});
  });

  it('accepts a near-verbatim answer in a fence with chatter, and still returns the original text', async () => {
    reply = () =>
      'Here you go:\n```json\n' +
      JSON.stringify({
        chunks: [
          P1.replace('Cats', 'cats').replace('domesticated', 'domesticated,'),
          `${P2.replace('Swiss', 'swiss')} ${P3.split(' ').slice(0, 3).join(' ')}`,
          P3.split(' ').slice(3).join(' '),
        ],
      }) +
      '\n```\nHope this helps!';
    const { chunker, env } = await make();
    const chunks = await chunker.chunk(TEXT, { type: 'llm-concept', size: 100 });
    // The boundary follows the model (inside P3), the words are the text's own.
    expect(chunks).toEqual([P1, `${P2}\n\n  ${P3.split(' ').slice(0, 3).join(' ')}`, P3.split(' ').slice(3).join(' ')]);
    expect(await fallbacks(env)).toEqual({});
  });

  it('cuts a concept longer than size words into size-word pieces', async () => {
    reply = (r) => JSON.stringify({ chunks: [conceptWindow(r)] });
    const { chunker } = await make();
    const chunks = await chunker.chunk(TEXT, { type: 'llm-concept', size: 10 });
    expect(collapsed(chunks)).toEqual(byWords(TEXT, 10));
  });

  const unusable: Array<[string, (r: RecordedRequest) => string, string]> = [
    ['not JSON', () => 'Sure! I split the text into three parts about cats, rivers and bread.', 'invalid_json'],
    ['JSON of the wrong shape', () => JSON.stringify({ chunks: 'all of it' }), 'schema'],
    ['no chunks', () => JSON.stringify({ chunks: [] }), 'schema'],
    ['another key', () => JSON.stringify({ concepts: [P1, P2, P3] }), 'schema'],
    [
      'a paraphrase',
      () =>
        JSON.stringify({ chunks: ['Cats are independent pets that sleep a lot.', 'Rivers and bread are described.'] }),
      'not_verbatim',
    ],
    ['concepts out of order', () => JSON.stringify({ chunks: [P3, P2, P1] }), 'not_verbatim'],
    ['part of the text only', () => JSON.stringify({ chunks: [P1] }), 'incomplete'],
    ['words invented around the text', () => JSON.stringify({ chunks: [`${P1} ${P1} ${P1}`, P2, P3] }), 'not_verbatim'],
  ];
  it.each(unusable)(
    'falls back to words for %s (reason %s), counted and logged without the text',
    async (_, answer, reason) => {
      reply = answer;
      const { chunker, env, logs } = await make();
      const chunks = await chunker.chunk(TEXT, { type: 'llm-concept', size: 8 });
      expect(chunks).toEqual(await (await make({ types: ['words'] })).chunker.chunk(TEXT, { type: 'words', size: 8 }));
      expect(await fallbacks(env)).toEqual({ [`llm-concept/${reason}`]: 1 });
      const warning = logs
        .map((l) => JSON.parse(l))
        .find((l) => l.msg === 'chunking model answer unusable; chunked by words');
      expect(warning).toMatchObject({
        chunking_type: 'llm-concept',
        reason,
        window_words: 70,
        window_chars: TEXT.trim().length,
      });
      expect(logs.join('\n')).not.toContain('Rhine');
      expect(logs.join('\n')).not.toContain(API_KEY);
    },
  );
});

describe('llm-introspection', () => {
  /** Starts a section at each sentence that opens a topic, with a title. */
  const topics = (r: RecordedRequest) => {
    const chunks = numberedSentences(r).flatMap((sentence, start) => {
      const topic = /^(Cats|The Rhine|Bread)\b/.exec(sentence)?.[1];
      return topic ? [{ start, title: `About ${topic}` }] : [];
    });
    return JSON.stringify({ summary: 'Cats, a river and bread.', chunks });
  };

  it('splits at the proposed sentences and returns exact slices', async () => {
    reply = topics;
    const { chunker, env } = await make();
    expect(await chunker.chunk(TEXT, { type: 'llm-introspection', size: 100 })).toEqual([P1, P2, P3]);
    const request = backend.requests[0];
    expect(systemPrompt(request)).toContain('A section has at most 100 words.');
    expect(userPrompt(request).split('\n')).toEqual([
      '[0] Cats are small domesticated carnivores.',
      '[1] They sleep for most of the day.',
      '[2] Many people keep them as pets because they are independent.',
      '[3] The Rhine is a major European river.',
      '[4] It flows from the Swiss Alps to the North Sea.',
      '[5] Barges carry goods along much of its length.',
      '[6] Bread is made from flour, water and yeast.',
      '[7] The dough rises before it is baked.',
      '[8] A hot oven gives it a crisp crust.',
    ]);
    expect(await fallbacks(env)).toEqual({});
  });

  it('puts the titles in front of the chunks with include_titles', async () => {
    reply = topics;
    const { chunker } = await make({ include_titles: true });
    expect(await chunker.chunk(TEXT, { type: 'llm-introspection', size: 100 })).toEqual([
      `About Cats\n\n${P1}`,
      `About The Rhine\n\n${P2}`,
      `About Bread\n\n${P3}`,
    ]);
  });

  it('does not ask the model about a single sentence', async () => {
    reply = () => 'never used';
    const { chunker } = await make();
    expect(await chunker.chunk('  Just one sentence here  ', { type: 'llm-introspection', size: 10 })).toEqual([
      'Just one sentence here',
    ]);
    expect(backend.requests).toHaveLength(0);
  });

  const invalid: Array<[string, unknown, string]> = [
    ['a first section after sentence 0', { chunks: [{ start: 3, title: 'x' }] }, 'invalid_split_points'],
    [
      'decreasing starts',
      {
        chunks: [
          { start: 0, title: 'a' },
          { start: 6, title: 'b' },
          { start: 3, title: 'c' },
        ],
      },
      'invalid_split_points',
    ],
    [
      'a repeated start',
      {
        chunks: [
          { start: 0, title: 'a' },
          { start: 0, title: 'b' },
        ],
      },
      'invalid_split_points',
    ],
    [
      'a sentence past the end',
      {
        chunks: [
          { start: 0, title: 'a' },
          { start: 9, title: 'b' },
        ],
      },
      'invalid_split_points',
    ],
    [
      'a fractional start',
      {
        chunks: [
          { start: 0, title: 'a' },
          { start: 2.5, title: 'b' },
        ],
      },
      'schema',
    ],
    ['a negative start', { chunks: [{ start: -1, title: 'a' }] }, 'schema'],
    ['a missing title', { chunks: [{ start: 0 }] }, 'schema'],
    ['an empty title', { chunks: [{ start: 0, title: '' }] }, 'schema'],
    ['character offsets as strings', { chunks: [{ start: '0', title: 'a' }] }, 'schema'],
  ];
  it.each(invalid)('falls back to words for %s (reason %s)', async (_, answer, reason) => {
    reply = () => JSON.stringify(answer);
    const { chunker, env } = await make();
    const chunks = await chunker.chunk(TEXT, { type: 'llm-introspection', size: 8 });
    expect(collapsed(chunks)).toEqual(byWords(TEXT, 8));
    expect(await fallbacks(env)).toEqual({ [`llm-introspection/${reason}`]: 1 });
  });
});

describe('long texts: windows', () => {
  // 12 paragraphs of 15 words: 180 words.
  const paragraphs = Array.from({ length: 12 }, (_, p) =>
    Array.from({ length: 15 }, (_, w) => `p${p}w${w}`)
      .join(' ')
      .concat('.'),
  );
  const long = paragraphs.join('\n\n');

  it('windows the text, carries the cut-off last concept into the next window, loses nothing', async () => {
    reply = paragraphsAnswer;
    const { chunker } = await make({ window_words: 50 });
    expect(await chunker.chunk(long, { type: 'llm-concept', size: 100 })).toEqual(paragraphs);
    const windows = backend.requests.map((r) => conceptWindow(r).split(/\s+/).length);
    expect(windows.length).toBeGreaterThan(3);
    expect(Math.max(...windows)).toBeLessThanOrEqual(50);
    // Each window after the first starts with the paragraph the previous one cut.
    expect(conceptWindow(backend.requests[1]).startsWith('p3w0')).toBe(true);
  });

  it('introspection windows too', async () => {
    reply = (r) =>
      JSON.stringify({
        chunks: numberedSentences(r).map((_, start) => ({ start, title: `s${start}` })),
      });
    const { chunker } = await make({ window_words: 50 });
    expect(await chunker.chunk(long, { type: 'llm-introspection', size: 100 })).toEqual(paragraphs);
    expect(backend.requests.length).toBeGreaterThan(3);
  });

  it('stops asking after max_windows: the rest is chunked by words (reason too_long)', async () => {
    reply = paragraphsAnswer;
    const { chunker, env } = await make({ window_words: 50, max_windows: 1 });
    const chunks = await chunker.chunk(long, { type: 'llm-concept', size: 20 });
    expect(backend.requests).toHaveLength(1);
    // Window 1 (words 0-49) gives paragraphs 0-2; the last, cut paragraph is left to the words chunker.
    expect(chunks.slice(0, 3)).toEqual(paragraphs.slice(0, 3));
    expect(collapsed(chunks.slice(3))).toEqual(byWords(paragraphs.slice(3).join(' '), 20));
    expect(await fallbacks(env)).toEqual({ 'llm-concept/too_long': 1 });
  });

  it('a window that falls back does not affect the others', async () => {
    let call = 0;
    reply = (r) => (++call === 2 ? 'garbage' : paragraphsAnswer(r));
    const { chunker, env } = await make({ window_words: 50 });
    const chunks = await chunker.chunk(long, { type: 'llm-concept', size: 100 });
    expect(chunks.join(' ').split(/\s+/)).toEqual(long.split(/\s+/));
    expect(chunks.slice(0, 3)).toEqual(paragraphs.slice(0, 3));
    expect(chunks.at(-1)).toBe(paragraphs.at(-1));
    expect(await fallbacks(env)).toEqual({ 'llm-concept/invalid_json': 1 });
  });
});

describe('when the model fails', () => {
  it('an HTTP error falls back to words (reason llm_error)', async () => {
    const { chunker, env } = await make({}, { model: 'error-500' });
    expect(collapsed(await chunker.chunk(TEXT, { type: 'llm-concept', size: 8 }))).toEqual(byWords(TEXT, 8));
    expect(await fallbacks(env)).toEqual({ 'llm-concept/llm_error': 1 });
  });

  it('a wrong key is an llm_error too, and the key is not logged', async () => {
    const { chunker, env, logs } = await make({}, { api_key: 'sk-wrong-secret-key' });
    await chunker.chunk(TEXT, { type: 'llm-introspection', size: 8 });
    expect(await fallbacks(env)).toEqual({ 'llm-introspection/llm_error': 1 });
    expect(logs.join('\n')).not.toContain('sk-wrong-secret-key');
  });

  it('a timeout falls back (reason llm_timeout)', async () => {
    const { chunker, env } = await make({}, { base_url: slow.url, api_key: undefined, timeout_ms: 100 });
    expect(collapsed(await chunker.chunk(TEXT, { type: 'llm-concept', size: 8 }))).toEqual(byWords(TEXT, 8));
    expect(await fallbacks(env)).toEqual({ 'llm-concept/llm_timeout': 1 });
  });

  it('a cut-off answer (finish_reason length) falls back (reason truncated)', async () => {
    const truncating = await startTruncatingLlm('{"chunks": ["Cats are small domesticated');
    try {
      const { chunker, env } = await make({}, { base_url: truncating.url });
      expect(collapsed(await chunker.chunk(TEXT, { type: 'llm-concept', size: 8 }))).toEqual(byWords(TEXT, 8));
      expect(await fallbacks(env)).toEqual({ 'llm-concept/truncated': 1 });
    } finally {
      await truncating.close();
    }
  });

  it('with fallback_on_error: false, errors are 502 upstream_error and timeouts 504 upstream_timeout', async () => {
    const failing = await make({ fallback_on_error: false }, { model: 'error-503' });
    const err = await failing.chunker.chunk(TEXT, { type: 'llm-concept', size: 8 }).catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({
      kind: 'upstream_error',
      message: 'The chunking model request failed',
      details: { reason: 'http' },
    });
    const slowOne = await make({ fallback_on_error: false }, { base_url: slow.url, timeout_ms: 100 });
    const timeout = await slowOne.chunker.chunk(TEXT, { type: 'llm-introspection', size: 8 }).catch((e) => e);
    expect(timeout).toMatchObject({ kind: 'upstream_timeout' });
    // An unusable answer still falls back: the option is about reaching the model.
    reply = () => 'nope';
    const strict = await make({ fallback_on_error: false });
    await expect(strict.chunker.chunk(TEXT, { type: 'llm-concept', size: 8 })).resolves.toHaveLength(9);
  });

  it('counts model requests by outcome', async () => {
    reply = paragraphsAnswer;
    const { chunker, env } = await make();
    await chunker.chunk(TEXT, { type: 'llm-concept', size: 100 });
    reply = () => 'nope';
    await chunker.chunk(TEXT, { type: 'llm-concept', size: 100 });
    const values = (await env.metrics.registry.getSingleMetric('switchyard_chunk_llm_requests_total')?.get())?.values;
    expect(values?.map((v) => [v.labels.outcome, v.value])).toEqual([
      ['ok', 1],
      ['unusable', 1],
    ]);
  });
});
