/**
 * Random-weight models with the exact shapes of the shipped embedding models, generated once into
 * $TMPDIR/switchyard-bench-embed (one folder per model name, as `models_dir` expects) and kept for
 * the next run: what the embedding benchmarks load, since no model is downloaded here.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateTinyBert } from '../../scripts/models/generate-tiny-bert.ts';

/** The `models_dir` (EMBED_MODELS_DIR) holding the generated models. */
export const benchModelsDir = join(tmpdir(), 'switchyard-bench-embed');

/** Layers of the shapes the benchmarks use (hidden 384, 12 heads, intermediate 1536, vocabulary 30522). */
export const SHAPE_LAYERS = { AllMiniLML6V2: 6, BGESmallENV15: 12 } as const;

/** Generates model `name` unless it is there; returns its folder. */
export function ensureModel(name: keyof typeof SHAPE_LAYERS): string {
  const dir = join(benchModelsDir, name);
  if (!existsSync(join(dir, 'model.onnx'))) {
    mkdirSync(benchModelsDir, { recursive: true });
    const layers = SHAPE_LAYERS[name];
    console.log(`generating ${name} (${layers} layers, hidden 384) in ${dir} ...`);
    generateTinyBert(dir, {
      task: 'feature-extraction',
      layers,
      hidden: 384,
      heads: 12,
      intermediate: 1536,
      maxPositions: 512,
      initStd: 0.02,
      seed: 7,
    });
  }
  return dir;
}
