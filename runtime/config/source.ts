/**
 * Reading a config file: YAML (with source positions, so every error can name file:line:column)
 * or TOML. The result is the plain value plus a `locate` function from a path to a position.
 */
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { isMap, isScalar, LineCounter, parseDocument } from 'yaml';
import { explainYamlError } from './yaml-errors.ts';

export type ConfigPath = Array<string | number>;

export interface Position {
  line: number;
  column: number;
}

export interface ConfigSource {
  file: string;
  text: string;
  value: unknown;
  /**
   * Position of the deepest node that exists along `path` (1-based line and column); with
   * `key`, of the key that names it (an unknown property is its key, not its value).
   */
  locate(path: ConfigPath, point?: 'value' | 'key'): Position;
}

export class ConfigError extends Error {
  constructor(readonly problems: ConfigProblem[]) {
    // In file order, as an editor shows them.
    problems.sort((a, b) => (a.file === b.file ? a.line - b.line || a.column - b.column : 0));
    super(problems.map(formatProblem).join('\n'));
    this.name = 'ConfigError';
  }
}

export interface ConfigProblem {
  file: string;
  line: number;
  column: number;
  /** Path in the config, e.g. `routes[2].pipeline[0].schema-validate.mode`. */
  path: string;
  message: string;
}

export function formatProblem(p: ConfigProblem): string {
  return `${p.file}:${p.line}:${p.column}: ${p.path ? `${p.path}: ` : ''}${p.message}`;
}

export function formatPath(path: ConfigPath): string {
  let out = '';
  for (const seg of path) out += typeof seg === 'number' ? `[${seg}]` : out ? `.${seg}` : seg;
  return out;
}

export function readConfigSource(file: string): ConfigSource {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([
      { file, line: 0, column: 0, path: '', message: `cannot read file: ${(err as Error).message}` },
    ]);
  }
  return extname(file) === '.toml' ? parseTomlSource(file, text) : parseYamlSource(file, text);
}

function parseYamlSource(file: string, text: string): ConfigSource {
  const lineCounter = new LineCounter();
  // merge: YAML `<<` merge keys, so that routes can share stage options through anchors.
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, merge: true });
  const error = doc.errors[0];
  if (error) {
    // The first error only: the ones after it are its echoes.
    const p = explainYamlError(error, text, lineCounter);
    throw new ConfigError([{ file, line: p.line, column: p.column, path: '', message: `YAML syntax: ${p.message}` }]);
  }
  const at = (offset: number): Position => {
    const pos = lineCounter.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  const locate = (path: ConfigPath, point: 'value' | 'key' = 'value'): Position => {
    const last = path.at(-1);
    if (point === 'key' && typeof last === 'string') {
      const parent = doc.getIn(path.slice(0, -1), true);
      if (isMap(parent)) {
        const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === last);
        const range = (pair?.key as { range?: [number, number, number] } | undefined)?.range;
        if (range) return at(range[0]);
      }
    }
    for (let n = path.length; n >= 0; n--) {
      const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined;
      if (node && typeof node === 'object' && node.range) {
        const pos = lineCounter.linePos(node.range[0]);
        return { line: pos.line, column: pos.col };
      }
      // Keys of maps: point at the key when the value node carries no range.
    }
    return { line: 1, column: 1 };
  };
  return { file, text, value: doc.toJS({ maxAliasCount: 100 }), locate };
}

function parseTomlSource(file: string, text: string): ConfigSource {
  let value: unknown;
  try {
    value = parseToml(text);
  } catch (err) {
    const e = err as { line?: number; column?: number; message: string };
    throw new ConfigError([
      { file, line: e.line ?? 1, column: e.column ?? 1, path: '', message: e.message.split('\n')[0] ?? e.message },
    ]);
  }
  const lines = text.split('\n');
  // TOML has no position API: find the line that defines the last key of the path (best effort).
  const locate = (path: ConfigPath): Position => {
    for (let n = path.length; n > 0; n--) {
      const key = path[n - 1];
      if (typeof key !== 'string') continue;
      const re = new RegExp(
        `^\\s*(\\[+\\s*)?([\\w.-]*\\.)?"?${key.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')}"?\\s*(=|\\])`,
      );
      const idx = lines.findIndex((l) => re.test(l));
      if (idx >= 0) return { line: idx + 1, column: (lines[idx]?.search(/\S/) ?? 0) + 1 };
    }
    return { line: 1, column: 1 };
  };
  return { file, text, value, locate };
}
