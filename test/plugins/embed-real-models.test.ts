/**
 * The same resource on real models, when a directory of them is given (EMBED_REAL_MODELS_DIR,
 * laid out as scripts/models/download-embedding.ts writes it): every installed model of the cards
 * is loaded and checked for what holds of any real embedding model, since their weights cannot
 * be replayed by the tiny reference forward pass: the card's dimension, unit length, the same
 * vector alone and in a padded batch, order kept, the query prefix mattering where the card has
 * one, and a paraphrase closer than an unrelated sentence. Without the variable the suite is
 * skipped, saying so.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingModels } from '../../plugins/embed/api.ts';
import { MODEL_CARDS } from '../../plugins/embed/model-cards.ts';
import { locateModel } from '../../plugins/embed/model-files.ts';
import modelsResource from '../../plugins/embed/models-resource.ts';
import type { ResourceInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { cosine } from '../fixtures/embed-stages.ts';

const realDir = process.env.EMBED_REAL_MODELS_DIR;
const installed = realDir && existsSync(realDir) ? MODEL_CARDS.filter((c) => 'files' in locateModel(realDir, c)) : [];
const reason = !realDir
  ? 'skipped: set EMBED_REAL_MODELS_DIR to a directory of downloaded models to run it'
  : installed.length === 0
    ? `skipped: no model of the cards is installed in ${realDir}`
    : `${installed.length} installed in ${realDir}`;

describe(`real embedding models (${reason})`, () => {
  if (installed.length === 0) {
    it.skip(reason, () => {});
    return;
  }
  let resource: ResourceInstance<EmbeddingModels>;

  beforeAll(async () => {
    resource = (await modelsResource.create(
      { models_dir: realDir, pool_size: 1, batch_size: 8 } as never,
      createTestEnv(),
    )) as ResourceInstance<EmbeddingModels>;
  }, 300_000);
  afterAll(() => resource?.close?.());

  for (const card of installed) {
    it(`${card.name} (${card.repo}/${card.file})`, { timeout: 300_000 }, async () => {
      const models = resource.value;
      const texts = [
        'A cat is sitting on the mat.',
        'There is a cat on the mat.',
        'The stock market fell sharply on Monday.',
        'ok',
      ];
      const batch = await models.embed(card.name, texts);
      expect(batch).toHaveLength(texts.length);
      for (const vector of batch) {
        expect(vector).toHaveLength(card.dimension);
        if (card.normalize) expect(Math.hypot(...vector)).toBeCloseTo(1, 4);
      }
      // Padding must not change a vector. Dynamically quantised graphs scale activations per
      // batch, so they agree less closely.
      const tolerance = card.quantization === 'dynamic' ? 0.995 : 0.99999;
      for (let i = 0; i < texts.length; i++) {
        const [alone] = await models.embed(card.name, [texts[i]]);
        expect(cosine(alone, batch[i])).toBeGreaterThanOrEqual(tolerance);
      }
      expect(cosine(batch[0], batch[1])).toBeGreaterThan(cosine(batch[0], batch[2]));
      if (card.prefixes.query !== card.prefixes.passage) {
        const [query] = await models.embed(card.name, [texts[0]], { inputType: 'query' });
        expect(cosine(query, batch[0])).toBeLessThan(0.99999);
      }
      // Longer than any limit: truncated, not refused.
      const [long] = await models.embed(card.name, ['word '.repeat(20_000)]);
      expect(long).toHaveLength(card.dimension);
    });
  }
});
