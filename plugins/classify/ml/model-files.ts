/** Locating a model's files under the models directory, with errors that name the path expected. */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';

/** The directory of `model` under `modelsDir`; throws when it is missing or escapes the models directory. */
export function modelDirectory(modelsDir: string, model: string): string {
  const root = resolve(modelsDir);
  const dir = resolve(root, model);
  const rel = relative(root, dir);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new Error(`model "${model}" must name a directory inside the models directory ${root}`);
  }
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new Error(`model directory not found: expected ${dir} (model "${model}" under the models directory ${root})`);
  }
  return dir;
}

/** The first of `candidates` (paths relative to `dir`) that exists; throws naming the first one. */
export function requireFile(dir: string, candidates: string[], what: string): string {
  for (const candidate of candidates) {
    const path = join(dir, candidate);
    if (existsSync(path)) return path;
  }
  const alternatives = candidates.length > 1 ? ` (or ${candidates.slice(1).join(', ')})` : '';
  throw new Error(`${what} not found: expected ${join(dir, candidates[0])}${alternatives}`);
}

export function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
}
