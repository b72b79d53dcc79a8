/**
 * The `embedding-models` resource on tiny BERT-shaped ONNX models generated under the seed's
 * names, against the reference forward pass of test/fixtures/embed-stages.ts: CLS and mean
 * pooling, normalisation, the E5 / Nomic / mxbai prefixes, padding in batches, truncation, the
 * session pool, and the errors for models that are unknown, absent or broken.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingModels } from '../../plugins/embed/api.ts';
import { MODEL_CARDS } from '../../plugins/embed/model-cards.ts';
import modelsResource from '../../plugins/embed/models-resource.ts';
import { TokenEncoder } from '../../plugins/embed/token-encoder.ts';
import type { ResourceInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { cosine, generateTinyModel, type TinyModel } from '../fixtures/embed-stages.ts';

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'How do I make git ignore the node_modules folder?',
  'ok',
  'Embeddings map text to vectors; similar texts get similar vectors.',
  'naïve café — déjà vu',
];

let dir: string;
const tiny: Record<string, TinyModel> = {};
let resource: ResourceInstance<EmbeddingModels>;
let models: EmbeddingModels;

function expectClose(actual: number[], expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  expect(cosine(actual, expected)).toBeGreaterThanOrEqual(0.99999);
  expect(Math.hypot(...actual)).toBeCloseTo(1, 5);
}

async function open(options: Record<string, unknown>): Promise<ResourceInstance<EmbeddingModels>> {
  return (await modelsResource.create(
    { models_dir: dir, ...options } as never,
    createTestEnv({ configDir: dir }),
  )) as ResourceInstance<EmbeddingModels>;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'embed-models-'));
  // CLS pooling (BGE), mean pooling (MiniLM), E5 (mean + query:/passage:, an export without
  // token_type_ids as XLM-R exports are), Nomic (mean + search_*), mxbai (CLS + query instruction).
  tiny.BGESmallENV15 = generateTinyModel(dir, 'BGESmallENV15', { seed: 1 });
  tiny.AllMiniLML6V2 = generateTinyModel(dir, 'AllMiniLML6V2', { seed: 2 });
  tiny.MultilingualE5Small = generateTinyModel(dir, 'MultilingualE5Small', { seed: 3, tokenTypeIds: false });
  tiny.AlphaEmbedTextV15 = generateTinyModel(dir, 'AlphaEmbedTextV15', { seed: 4, hidden: 16, heads: 2 });
  tiny.BetaEmbedLargeV1 = generateTinyModel(dir, 'BetaEmbedLargeV1', { seed: 5 });
  const overrides = Object.fromEntries(Object.values(tiny).map((m) => [m.name, { dimension: m.hidden }]));
  resource = await open({ pool_size: 2, batch_size: 4, models: overrides, preload: ['BGESmallENV15'] });
  models = resource.value;
});

afterAll(async () => {
  await resource?.close?.();
  rmSync(dir, { recursive: true, force: true });
});

describe('model cards', () => {
  it('name all 22 models of the seed, with a repository, file, dimension, pooling and length', () => {
    const seed =
      'AllMiniLML6V2, AllMiniLML6V2Q, AllMiniLML12V2, AllMiniLML12V2Q, BGEBaseENV15, BGEBaseENV15Q, BGELargeENV15, BGELargeENV15Q, BGESmallENV15, BGESmallENV15Q, AlphaEmbedTextV1, AlphaEmbedTextV15, AlphaEmbedTextV15Q, ParaphraseMLMiniLML12V2, ParaphraseMLMiniLML12V2Q, ParaphraseMLMpnetBaseV2, BGESmallZHV15, MultilingualE5Small, MultilingualE5Base, MultilingualE5Large, BetaEmbedLargeV1, BetaEmbedLargeV1Q'.split(
        ', ',
      );
    expect(MODEL_CARDS.map((c) => c.name)).toEqual(seed);
    expect(models.names()).toEqual(seed);
    for (const card of MODEL_CARDS) {
      expect(card.repo).toMatch(/^[\w.-]+\/[\w.-]+$/);
      expect(card.file).toMatch(/\.onnx$/);
      expect([384, 512, 768, 1024]).toContain(card.dimension);
      expect(['cls', 'mean']).toContain(card.pooling);
      expect(card.maxLength).toBeGreaterThanOrEqual(128);
      // Quantized variants read a quantized graph.
      if (card.name.endsWith('Q')) expect(card.file).toMatch(/model_(quantized|optimized)\.onnx$/);
    }
    expect(models.card('MultilingualE5Base')?.prefixes).toEqual({ query: 'query: ', passage: 'passage: ' });
    expect(models.card('AlphaEmbedTextV1')?.prefixes).toEqual({
      query: 'search_query: ',
      passage: 'search_document: ',
    });
    expect(models.card('BetaEmbedLargeV1Q')?.model).toBe('mixedbread-ai/mxbai-embed-large-v1');
  });
});

describe('vectors against the reference forward pass', () => {
  it('CLS pooling, normalised (BGESmallENV15), one text at a time', async () => {
    const m = tiny.BGESmallENV15;
    for (const text of TEXTS) {
      const [vector] = await models.embed('BGESmallENV15', [text]);
      expectClose(vector, m.reference.embed(m.ids(text), 'cls'));
    }
  });

  it('mean pooling, normalised (AllMiniLML6V2), a padded batch: every vector in its place', async () => {
    const m = tiny.AllMiniLML6V2;
    const vectors = await models.embed('AllMiniLML6V2', TEXTS);
    expect(vectors).toHaveLength(TEXTS.length);
    TEXTS.forEach((text, i) => {
      expectClose(vectors[i], m.reference.embed(m.ids(text), 'mean'));
    });
  });

  it('E5: "passage: " by default, "query: " for queries; an export without token_type_ids', async () => {
    const m = tiny.MultilingualE5Small;
    const text = TEXTS[1];
    const [passage] = await models.embed('MultilingualE5Small', [text]);
    const [query] = await models.embed('MultilingualE5Small', [text], { inputType: 'query' });
    expectClose(passage, m.reference.embed(m.ids(`passage: ${text}`), 'mean'));
    expectClose(query, m.reference.embed(m.ids(`query: ${text}`), 'mean'));
    expect(cosine(passage, query)).toBeLessThan(0.99999);
    // A text that already carries a prefix of the model is taken as it is.
    const [already] = await models.embed('MultilingualE5Small', [`query: ${text}`]);
    expectClose(already, m.reference.embed(m.ids(`query: ${text}`), 'mean'));
    expect(models.status('MultilingualE5Small').status).toBe('loaded');
  });

  it('Nomic (AlphaEmbedTextV15): "search_document: " / "search_query: "', async () => {
    const m = tiny.AlphaEmbedTextV15;
    const [doc, query] = await Promise.all([
      models.embed('AlphaEmbedTextV15', [TEXTS[0]]),
      models.embed('AlphaEmbedTextV15', [TEXTS[0]], { inputType: 'query' }),
    ]);
    expectClose(doc[0], m.reference.embed(m.ids(`search_document: ${TEXTS[0]}`), 'mean'));
    expectClose(query[0], m.reference.embed(m.ids(`search_query: ${TEXTS[0]}`), 'mean'));
    expect(doc[0]).toHaveLength(16);
  });

  it('mxbai (BetaEmbedLargeV1): CLS, an instruction for queries, nothing for passages', async () => {
    const m = tiny.BetaEmbedLargeV1;
    const [[passage], [query]] = await Promise.all([
      models.embed('BetaEmbedLargeV1', [TEXTS[3]]),
      models.embed('BetaEmbedLargeV1', [TEXTS[3]], { inputType: 'query' }),
    ]);
    expectClose(passage, m.reference.embed(m.ids(TEXTS[3]), 'cls'));
    expectClose(
      query,
      m.reference.embed(m.ids(`Represent this sentence for searching relevant passages: ${TEXTS[3]}`), 'cls'),
    );
  });

  it('many texts over several batches and both workers come back in order', async () => {
    const m = tiny.BGESmallENV15;
    const texts = Array.from({ length: 37 }, (_, i) => `${TEXTS[i % TEXTS.length]} ${'more '.repeat(i % 7)}${i}`);
    const [batched, again] = await Promise.all([
      models.embed('BGESmallENV15', texts),
      models.embed('BGESmallENV15', texts),
    ]);
    texts.forEach((text, i) => {
      expectClose(batched[i], m.reference.embed(m.ids(text), 'cls'));
      expect(again[i]).toEqual(batched[i]);
    });
  });

  it('an empty list gives an empty list', async () => {
    expect(await models.embed('BGESmallENV15', [])).toEqual([]);
  });
});

describe('truncation to the token limit', () => {
  it('keeps the first tokens that fit, special tokens included', async () => {
    const m = tiny.BGESmallENV15;
    const short = await open({ models: { BGESmallENV15: { dimension: 32, max_length: 16 } } });
    try {
      const text = TEXTS.join(' ');
      const content = m.tokenizer.encode(text, { add_special_tokens: false }).ids;
      expect(content.length).toBeGreaterThan(14);
      const [vector] = await short.value.embed('BGESmallENV15', [text]);
      expectClose(vector, m.reference.embed([101, ...content.slice(0, 14), 102], 'cls'));
    } finally {
      await short.close?.();
    }
  });

  it('a very long text gives the ids of truncating the whole text (only a prefix is tokenised)', () => {
    const m = tiny.BGESmallENV15;
    const encoder = new TokenEncoder(m.tokenizer, { prefixes: { query: '', passage: '' } }, 64);
    const words = ['alpha', 'beta,', 'gamma.', 'unbelievably', '日本語', 'naïve', 'x'.repeat(120), "don't"];
    const long = Array.from({ length: 20_000 }, (_, i) => words[i % words.length]).join(' ');
    const whole = m.tokenizer.encode(long, { add_special_tokens: false }).ids.slice(0, 62);
    expect(encoder.encode(long)).toEqual([101, ...whole, 102]);
    // Without whitespace the text is tokenised whole, still correctly.
    const solid = 'a'.repeat(3000);
    const solidIds = m.tokenizer.encode(solid, { add_special_tokens: false }).ids.slice(0, 62);
    expect(encoder.encode(solid)).toEqual([101, ...solidIds, 102]);
  });
});

describe('errors', () => {
  it('an unknown model: Unsupported embedding model: <name> (400)', async () => {
    await expect(models.embed('GPT5', ['x'])).rejects.toMatchObject({
      kind: 'bad_request',
      message: 'Unsupported embedding model: GPT5',
    });
  });

  it('a model whose files are absent: 503 saying which files go in which directory', async () => {
    const err = await models.embed('BGEBaseENV15', ['x']).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'unavailable' });
    const message = (err as Error).message;
    expect(message).toContain('Embedding model BGEBaseENV15 is not installed');
    expect(message).toContain('onnx/model.onnx, tokenizer.json');
    expect(message).toContain('Xenova/bge-base-en-v1.5');
    expect(message).toContain(join(dir, 'BGEBaseENV15'));
    expect(message).toContain('npx tsx scripts/models/download-embedding.ts BGEBaseENV15');
    expect(models.status('BGEBaseENV15').status).toBe('missing');
  });

  it('a tokenizer missing from an otherwise present model is named', async () => {
    generateTinyModel(dir, 'AllMiniLML12V2', { seed: 9 });
    rmSync(join(dir, 'AllMiniLML12V2', 'tokenizer.json'));
    await expect(models.embed('AllMiniLML12V2', ['x'])).rejects.toThrow(/put tokenizer\.json \(from/);
  });

  it('a broken graph: 500 with the load error, retried on the next request', async () => {
    generateTinyModel(dir, 'BGESmallZHV15', { seed: 10 });
    writeFileSync(join(dir, 'BGESmallZHV15', 'model.onnx'), 'not an onnx file');
    const err = await models.embed('BGESmallZHV15', ['x']).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'internal_error' });
    expect((err as Error).message).toMatch(/^Embedding model BGESmallZHV15 failed to load: cannot load ONNX model/);
    expect(models.status('BGESmallZHV15')).toMatchObject({ status: 'error' });
    // Fixed on disk: the next request loads it (the card wants 512 dimensions: the probe run says so).
    generateTinyModel(dir, 'BGESmallZHV15', { seed: 10 });
    await expect(models.embed('BGESmallZHV15', ['x'])).rejects.toThrow(
      /model\.onnx gives 32-dimensional vectors; model BGESmallZHV15 has 512/,
    );
  });

  it('health: ready once the preloaded models are loaded, with each model’s status', () => {
    const report = resource.health?.() as { ok: boolean; status: string; detail: Record<string, string[]> };
    expect(report.ok).toBe(true);
    expect(report.status).toBe('ready');
    expect(report.detail.loaded).toContain('BGESmallENV15');
    expect(report.detail.missing).toContain('BGELargeENV15');
  });

  it('health is not ok while a preloaded model is missing', async () => {
    const r = await open({ preload: ['AllMiniLML6V2Q'] });
    expect(r.health?.()).toMatchObject({ ok: false, status: 'not loaded: AllMiniLML6V2Q' });
    await r.close?.();
  });

  it('a new model needs file, dimension and pooling', async () => {
    await expect(open({ models: { MyModel: { dimension: 8 } } })).rejects.toThrow(
      'model "MyModel" is not a built-in card: it needs file, pooling',
    );
  });
});
