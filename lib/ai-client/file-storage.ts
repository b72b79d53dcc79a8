/**
 * A file-backed storage adapter for Node: all items in one JSON object, loaded when created and
 * written on every change (to a temporary file renamed over the old one, so a crash never leaves
 * half a file). Meant for one process; it is not a database.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { StorageAdapter } from './storage.ts';

export class FileStorage implements StorageAdapter {
  readonly path: string;
  readonly #items: Map<string, string>;

  constructor(path: string) {
    this.path = path;
    this.#items = new Map(Object.entries(readItems(path)));
  }

  getItem(key: string): string | null {
    return this.#items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.#items.set(key, String(value));
    this.#write();
  }
  removeItem(key: string): void {
    if (this.#items.delete(key)) this.#write();
  }
  keys(): string[] {
    return [...this.#items.keys()];
  }

  #write(): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const temp = `${this.path}.${process.pid}.tmp`;
    // 0600: the file may hold an API key when the user asked to persist it.
    writeFileSync(temp, JSON.stringify(Object.fromEntries(this.#items)), { mode: 0o600 });
    renameSync(temp, this.path);
  }
}

function readItems(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`${path}: not a storage file (expected a JSON object)`);
  }
  return Object.fromEntries(Object.entries(parsed).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
}
