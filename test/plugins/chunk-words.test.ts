import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Chunker } from '../../plugins/chunker/api.ts';
import chunkResource from '../../plugins/chunker/index.ts';
import { chunkWords } from '../../plugins/chunker/words.ts';
import { GatewayError } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

async function wordsOnly(): Promise<Chunker> {
  const instance = await chunkResource.create({ types: ['words'] }, createTestEnv());
  return instance.value;
}

const words = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `w${from + i}`);

describe('words chunking', () => {
  it('cuts size words per chunk, the last one shorter, in order', () => {
    const text = words(12).join(' ');
    expect(chunkWords(text, 5)).toEqual([words(5).join(' '), words(5, 5).join(' '), words(2, 10).join(' ')]);
  });

  it('an exact multiple leaves no short or empty chunk', () => {
    expect(chunkWords(words(10).join(' '), 5)).toHaveLength(2);
    expect(chunkWords(words(5).join(' '), 5)).toEqual([words(5).join(' ')]);
  });

  it('default size 512 through the resource: 1100 words give 512, 512, 76', async () => {
    const chunker = await wordsOnly();
    const chunks = await chunker.chunk(words(1100).join(' '), { type: 'words', size: 512 });
    expect(chunks.map((c) => c.split(' ').length)).toEqual([512, 512, 76]);
  });

  it('whitespace: none around chunks, kept as it was inside them, Unicode spaces count', () => {
    const text = '\n\t  alpha  beta\n\ngamma\u00a0delta\u2003epsilon \r\n zeta  ';
    expect(chunkWords(text, 2)).toEqual(['alpha  beta', 'gamma\u00a0delta', 'epsilon \r\n zeta']);
    expect(chunkWords(text, 100)).toEqual([text.trim()]);
  });

  it('empty and blank texts give no chunk', () => {
    expect(chunkWords('', 3)).toEqual([]);
    expect(chunkWords(' \n\t ', 3)).toEqual([]);
  });

  it('punctuation and non-Latin scripts stay inside their words', () => {
    expect(chunkWords('Hello, world! Ça va? 東京 タワー.', 2)).toEqual(['Hello, world!', 'Ça va?', '東京 タワー.']);
  });

  it('property: no word lost, none added, order kept, every chunk but the last has exactly size words', () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^\S{1,8}$/), { maxLength: 200 }),
        fc.array(fc.constantFrom(' ', '  ', '\n', '\t', ' \n '), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 40 }),
        (tokens, separators, size) => {
          const text = tokens.map((t, i) => t + separators[i % separators.length]).join('');
          const chunks = chunkWords(text, size);
          const counts = chunks.map((c) => c.split(/\s+/u).length);
          expect(chunks.flatMap((c) => c.split(/\s+/u))).toEqual(tokens);
          expect(counts.slice(0, -1).every((n) => n === size)).toBe(true);
          if (counts.length > 0) expect(counts.at(-1)).toBeLessThanOrEqual(size);
          for (const chunk of chunks) expect(text).toContain(chunk);
        },
      ),
    );
  });
});

describe('chunker contract', () => {
  it('lists its types; an unknown or disabled type is a bad_request with the seed message', async () => {
    const chunker = await wordsOnly();
    expect(chunker.types).toEqual(['words']);
    for (const type of ['sentences', 'llm-concept']) {
      const err = await chunker.chunk('a b', { type, size: 1 }).catch((e) => e);
      expect(err).toBeInstanceOf(GatewayError);
      expect(err.kind).toBe('bad_request');
      expect(err.message).toBe(`Unsupported chunking type: ${type}`);
    }
  });

  it('refuses a size that is not a positive integer', async () => {
    const chunker = await wordsOnly();
    for (const size of [0, -1, 1.5, Number.NaN]) {
      const err = await chunker.chunk('a b', { type: 'words', size }).catch((e) => e);
      expect(err).toBeInstanceOf(GatewayError);
      expect(err.message).toBe('Chunking size must be a positive integer');
    }
  });

  it('offers all three types by default, words first', async () => {
    const instance = await chunkResource.create({}, createTestEnv());
    expect(instance.value.types).toEqual(['words', 'llm-concept', 'llm-introspection']);
    expect(instance.describe?.()).toEqual({
      types: ['words', 'llm-concept', 'llm-introspection'],
      llm: { provider: 'local', model: 'llama3.2', base_url: 'http://localhost:11434/v1' },
    });
  });

  it('refuses to build with an LLM type and an unusable model config', async () => {
    const create = async (options: Parameters<typeof chunkResource.create>[0]) =>
      chunkResource.create(options, createTestEnv());
    await expect(create({ llm: { provider: 'custom', base_url: 'not a url', model: 'm' } })).rejects.toThrow(
      'chunker llm: baseUrl must be a valid http(s) URL',
    );
    await expect(create({ llm: { provider: 'hosted_a' } })).rejects.toThrow('apiKey is required for provider hosted_a');
    // Without an LLM type the model config does not matter.
    await expect(create({ types: ['words'], llm: { provider: 'custom', base_url: 'x' } })).resolves.toBeDefined();
  });
});
