/**
 * Pair selection: TF-IDF cosine, the similarity strategies and the UCB bandit, on cases whose
 * answer can be worked out by hand.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import modelsResource from '../../plugins/embed/models-resource.ts';
import { similarPair } from '../../plugins/pair-suggest/similar-pairs.ts';
import pairSuggest from '../../plugins/pair-suggest/stage.ts';
import { denseCosine, sparseCosine, tfidfVectors, tokenize } from '../../plugins/pair-suggest/tfidf.ts';
import { type BanditArm, ucbPair, ucbScore } from '../../plugins/pair-suggest/ucb.ts';
import recordType from '../../plugins/records/resource.ts';
import { openEntityStore, openSqlDatabase, type Stage, type StageInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { cosine, generateTinyModel } from '../fixtures/embed-stages.ts';
import { serveStages } from '../helpers/stage-harness.ts';

describe('TF-IDF cosine', () => {
  it('tokenizes Unicode words, lower-cased', () => {
    expect(tokenize("Crème brûlée, L'été 2024!")).toEqual(['crème', 'brûlée', 'l', 'été', '2024']);
  });

  it('computes the smoothed TF-IDF cosine', () => {
    const [a, b, c] = tfidfVectors(['red apple', 'red car', 'blue sky']);
    // idf(red) = ln(4/3)+1, idf(apple|car) = ln(4/2)+1; tf = 1 everywhere.
    const red = Math.log(4 / 3) + 1;
    const rare = Math.log(2) + 1;
    const expected = (red * red) / (red * red + rare * rare);
    expect(sparseCosine(a!, b!)).toBeCloseTo(expected, 12);
    expect(sparseCosine(a!, c!)).toBe(0);
    expect(sparseCosine(a!, a!)).toBeCloseTo(1, 12);
  });

  it('gives an empty document similarity 0', () => {
    const [a, b] = tfidfVectors(['', 'something']);
    expect(a!.size).toBe(0);
    expect(sparseCosine(a!, b!)).toBe(0);
  });

  it('computes dense cosine', () => {
    expect(denseCosine([1, 0], [0, 1])).toBe(0);
    expect(denseCosine([1, 2], [2, 4])).toBeCloseTo(1, 12);
    expect(denseCosine([0, 0], [1, 1])).toBe(0);
  });
});

const arm = (id: number, rating = 1500, comparisons = 0): BanditArm => ({ id, rating, comparisons });
const noPairs = () => 0;

describe('similarity strategies', () => {
  const docs = ['apple banana', 'apple banana cherry', 'zebra lion'];
  const vecs = tfidfVectors(docs);
  const sim = (i: number, j: number) => sparseCosine(vecs[i]!, vecs[j]!);
  const arms = [arm(1), arm(2), arm(3)];

  it('picks the most dissimilar pair, ties to the lowest ids', () => {
    const c = similarPair(arms, sim, noPairs, 'most-dissimilar');
    expect([c.first.id, c.second.id]).toEqual([1, 3]);
    expect(c.similarity).toBe(0);
  });

  it('picks the most similar pair', () => {
    const c = similarPair(arms, sim, noPairs, 'most-similar');
    expect([c.first.id, c.second.id]).toEqual([1, 2]);
    expect(c.similarity).toBeGreaterThan(0.5);
  });

  it('anchors on the least compared entity and prefers partners it has not met', () => {
    const counted = [arm(1, 1500, 3), arm(2, 1500, 1), arm(3, 1500, 2)];
    const c = similarPair(counted, sim, noPairs, 'anchor-dissimilar');
    expect([c.first.id, c.second.id]).toEqual([2, 3]);
    const met = (a: number, b: number) => (a + b === 5 ? 1 : 0);
    const d = similarPair(counted, sim, met, 'anchor-dissimilar');
    expect([d.first.id, d.second.id]).toEqual([2, 1]);
  });

  it('refuses fewer than two entities', () => {
    expect(() => similarPair([arm(1)], sim, noPairs, 'most-similar')).toThrow(/two/);
  });
});

describe('UCB', () => {
  it('computes the documented score', () => {
    const a = arm(1, 1500, 3);
    const b = arm(2, 1500, 0);
    // q = 1, u = (1/2 + 1)/2 = 0.75, bonus = c·sqrt(ln(11)/(1+1))
    expect(ucbScore(a, b, 1, 10, { exploration: 0.5 })).toBeCloseTo(0.75 + 0.5 * Math.sqrt(Math.log(11) / 2), 12);
  });

  it('serves cold-start entities first, fewest comparisons then lowest id', () => {
    const arms = [arm(1, 1600, 5), arm(2, 1500, 5), arm(3, 1400, 0), arm(4, 1500, 0)];
    const c = ucbPair(arms, noPairs, { exploration: 1 });
    expect(c.reason).toBe('cold_start');
    expect(c.first.id).toBe(3);
    // Partner maximises the score with 3: 4 (rating gap 100, never compared, uncertain).
    expect(c.second.id).toBe(4);
  });

  it('prefers uncertain close pairs without exploration, unexplored pairs with it', () => {
    const arms = [arm(1, 1500, 10), arm(2, 1510, 10), arm(3, 1800, 2)];
    // 1–2 are close and compared often; 1–3 and 2–3 never.
    const counts = (a: number, b: number) => (a + b === 3 ? 10 : 0);
    const exploit = ucbPair(arms, counts, { exploration: 0 });
    expect(exploit.reason).toBe('ucb');
    expect([exploit.first.id, exploit.second.id]).toEqual([1, 2]);
    const explore = ucbPair(arms, counts, { exploration: 2 });
    expect(explore.first.id === 3 || explore.second.id === 3).toBe(true);
  });

  it('honours the cold-start threshold', () => {
    const arms = [arm(1, 1500, 2), arm(2, 1500, 3), arm(3, 1500, 9)];
    expect(ucbPair(arms, noPairs, { exploration: 0, coldStart: 3 }).first.id).toBe(1);
    expect(ucbPair(arms, noPairs, { exploration: 0, coldStart: 1 }).reason).toBe('ucb');
  });

  it('refuses fewer than two entities', () => {
    expect(() => ucbPair([arm(1)], noPairs, { exploration: 1 })).toThrow(/two/);
  });
});

describe('pair-suggest with an embedding resource', () => {
  it('uses the embedder’s vectors (cached by text) instead of TF-IDF', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pairing-'));
    const db = await openSqlDatabase({ driver: 'sqlite', path: join(dir, 'p.db') });
    const store = await openEntityStore(db);
    const base = createTestEnv({ resources: { db: { store } } });
    const entities = (
      await recordType.create(
        {
          store: 'db',
          entity_type: 'entity',
          title: 'Entity',
          fields: {
            name: { type: 'string', required: true },
            rating: { type: 'number', read_only: true, default: 1500 },
          },
          search: [],
          timestamps: [],
        },
        base,
      )
    ).value;
    // A tiny embedding space: words that share a first letter point the same way.
    const calls: string[][] = [];
    const embedder = {
      async embed(texts: string[]) {
        calls.push(texts);
        return texts.map((t) => (t.startsWith('a') ? [1, 0] : t.startsWith('b') ? [0.9, 0.1] : [0, 1]));
      },
    };
    for (const name of ['apple', 'banana', 'cherry']) await store.create('entity', { name, rating: 1500 });
    const env = createTestEnv({ resources: { db: { store }, entities, embed: embedder } });
    const options = {
      items: 'entities',
      strategy: 'most-similar',
      text_fields: ['name'],
      embedder: 'embed',
      pool_size: 200,
    } as const;
    const stage = (await pairSuggest.create(options as never, env)) as StageInstance | Stage;
    const server = await serveStages([typeof stage === 'function' ? stage : stage.handle]);
    try {
      const body = (await (await fetch(`${server.url}/`)).json()) as {
        entity1: { name: string };
        entity2: { name: string };
        similarity: number;
      };
      expect([body.entity1.name, body.entity2.name]).toEqual(['apple', 'banana']);
      expect(body.similarity).toBeCloseTo(0.9 / Math.sqrt(0.82), 9);
      await fetch(`${server.url}/`);
      expect(calls).toEqual([['apple', 'banana', 'cherry']]);
    } finally {
      server.close();
      await store.close();
    }
  });
});

describe('pair-suggest with the embed plugin’s embedding-models resource', () => {
  it('pairs by the cosine of the model’s vectors of name + description', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pairing-embed-'));
    const tiny = generateTinyModel(dir, 'BGESmallENV15', { seed: 7 });
    const models = await modelsResource.create(
      { models_dir: dir, pool_size: 1, models: { BGESmallENV15: { dimension: tiny.hidden } } } as never,
      createTestEnv({ configDir: dir }),
    );
    const db = await openSqlDatabase({ driver: 'sqlite', path: join(dir, 'p.db') });
    const store = await openEntityStore(db);
    const base = createTestEnv({ resources: { db: { store } } });
    const entities = (
      await recordType.create(
        {
          store: 'db',
          entity_type: 'entity',
          title: 'Entity',
          fields: {
            name: { type: 'string', required: true },
            description: { type: 'string' },
            rating: { type: 'number', read_only: true, default: 1500 },
          },
          search: [],
          timestamps: [],
        },
        base,
      )
    ).value;
    const items = [
      { name: 'Dune', description: 'desert planet spice' },
      { name: 'Foundation', description: 'galactic empire psychohistory' },
      { name: 'Hyperion', description: 'pilgrims time tombs' },
    ];
    for (const item of items) await store.create('entity', { ...item, rating: 1500 });
    const env = createTestEnv({ resources: { db: { store }, entities, models: models.value } });
    const stage = (await pairSuggest.create(
      {
        items: 'entities',
        strategy: 'most-similar',
        embedder: 'models',
        embedding_model: 'BGESmallENV15',
        pool_size: 200,
      } as never,
      env,
    )) as StageInstance | Stage;
    const server = await serveStages([typeof stage === 'function' ? stage : stage.handle]);
    try {
      const body = (await (await fetch(`${server.url}/`)).json()) as {
        entity1: { name: string };
        entity2: { name: string };
        similarity: number;
      };
      // The expected pair and cosine, from the independent reference forward pass (CLS pooling).
      const texts = items.map((i) => `${i.name} ${i.description}`);
      const vectors = texts.map((t) => tiny.reference.embed(tiny.ids(t), 'cls'));
      let best = { a: 0, b: 1, cos: -2 };
      for (let a = 0; a < 3; a++)
        for (let b = a + 1; b < 3; b++) {
          const c = cosine(vectors[a]!, vectors[b]!);
          if (c > best.cos) best = { a, b, cos: c };
        }
      expect([body.entity1.name, body.entity2.name].sort()).toEqual([items[best.a]!.name, items[best.b]!.name].sort());
      expect(body.similarity).toBeCloseTo(best.cos, 4);
    } finally {
      server.close();
      await store.close();
      await models.close?.();
    }
  }, 60_000);
});
