/**
 * Where a model's files are: `<models_dir>/<Name>/`, laid out as in its Hugging Face repository
 * (e.g. `BGESmallENV15/onnx/model.onnx` and `BGESmallENV15/tokenizer.json`), which is what
 * scripts/models/download-embedding.ts writes. The graph may also sit at the top of the
 * directory (`BGESmallENV15/model.onnx`) for files copied by hand.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { ModelCard } from './api.ts';
import { TOKENIZER_FILES } from './model-cards.ts';

export interface ModelFiles {
  dir: string;
  model: string;
  tokenizer: string;
  /** tokenizer_config.json when present. */
  tokenizerConfig?: string;
  config?: string;
}

export function modelDir(modelsDir: string, name: string): string {
  return join(modelsDir, name);
}

function graphCandidates(card: ModelCard): string[] {
  const top = basename(card.file);
  return top === card.file ? [card.file] : [card.file, top];
}

/** The files of `card`, or a list of what is missing (paths relative to the model's directory). */
export function locateModel(modelsDir: string, card: ModelCard): { files: ModelFiles } | { missing: string[] } {
  const dir = modelDir(modelsDir, card.name);
  const missing: string[] = [];
  const graph = graphCandidates(card).find((candidate) => existsSync(join(dir, candidate)));
  if (!graph) missing.push(card.file);
  for (const extra of card.extraFiles) {
    // External weights sit beside the graph, wherever it is.
    const beside = graph ? join(graph, '..', basename(extra)) : extra;
    if (!existsSync(join(dir, beside))) missing.push(extra);
  }
  for (const file of TOKENIZER_FILES) if (!existsSync(join(dir, file))) missing.push(file);
  if (missing.length > 0 || !graph) return { missing };
  const optional = (file: string) => (existsSync(join(dir, file)) ? join(dir, file) : undefined);
  return {
    files: {
      dir,
      model: join(dir, graph),
      tokenizer: join(dir, 'tokenizer.json'),
      tokenizerConfig: optional('tokenizer_config.json'),
      config: optional('config.json'),
    },
  };
}

/** What an operator reads when a model is not installed: which files, which directory, which command. */
export function notInstalledMessage(modelsDir: string, card: ModelCard, missing: string[]): string {
  const source = card.repo ? ` (from the Hugging Face repository ${card.repo})` : '';
  const command = card.repo
    ? `; run: npx tsx scripts/models/download-embedding.ts ${card.name} --dir ${modelsDir}`
    : '';
  return (
    `Embedding model ${card.name} is not installed: put ${missing.join(', ')}${source} ` +
    `in ${modelDir(modelsDir, card.name)}${command}`
  );
}

export function readJsonFile(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
}
