/**
 * Cached chat answers in the storage under `ext_cache_<sha-256 of the request>` (seed 002), each
 * with an expiry, and bounded in number and in total size: writing a new entry first drops the
 * expired ones, then the oldest until both bounds hold. The key is a digest of the request (address,
 * model, messages, parameters), never of the API key, so nothing secret is in the storage keys.
 */
import type { StorageAdapter } from './storage.ts';

export const CACHE_PREFIX = 'ext_cache_';

export interface CacheOptions {
  /** Default true. */
  enabled?: boolean;
  /** Lifetime of an entry (default one hour). */
  ttlMs?: number;
  /** At most this many entries (default 100). */
  maxEntries?: number;
  /** At most this many characters of keys and values in all (default 1 MiB; browsers allow ~5 M per origin). */
  maxChars?: number;
}

interface Entry<T> {
  storedAt: number;
  expiresAt: number;
  value: T;
}

export class ResponseCache<T> {
  readonly ttlMs: number;
  readonly maxEntries: number;
  readonly maxChars: number;
  readonly #storage: StorageAdapter;
  readonly #now: () => number;

  constructor(storage: StorageAdapter, options: CacheOptions = {}, now: () => number = Date.now) {
    this.#storage = storage;
    this.#now = now;
    this.ttlMs = options.ttlMs ?? 3_600_000;
    this.maxEntries = options.maxEntries ?? 100;
    this.maxChars = options.maxChars ?? 1024 * 1024;
  }

  /** The storage key of a request: its SHA-256 (Web Crypto, in browsers and Node alike). */
  async keyOf(material: unknown): Promise<string> {
    const bytes = new TextEncoder().encode(JSON.stringify(material));
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
    return CACHE_PREFIX + Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  get(key: string): T | undefined {
    const entry = this.#read(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#storage.removeItem(key);
      return undefined;
    }
    return entry.value;
  }

  /** Stores a value; one larger than the whole budget is not stored. Returns whether it was. */
  set(key: string, value: T): boolean {
    const now = this.#now();
    const text = JSON.stringify({ storedAt: now, expiresAt: now + this.ttlMs, value } satisfies Entry<T>);
    if (key.length + text.length > this.maxChars || this.maxEntries < 1) return false;
    this.#storage.removeItem(key);
    this.#makeRoom(key.length + text.length);
    try {
      this.#storage.setItem(key, text);
      return true;
    } catch {
      // The store is full for other reasons (other keys of the origin): the answer is just not cached.
      return false;
    }
  }

  /** Removes every cache entry (not the config). */
  clear(): void {
    for (const key of this.#keys()) this.#storage.removeItem(key);
  }

  /** Entries and characters used now, expired ones included until the next write. */
  stats(): { entries: number; chars: number } {
    let chars = 0;
    const keys = this.#keys();
    for (const key of keys) chars += key.length + (this.#storage.getItem(key)?.length ?? 0);
    return { entries: keys.length, chars };
  }

  #keys(): string[] {
    return this.#storage.keys().filter((key) => key.startsWith(CACHE_PREFIX));
  }

  /** The entry and its stored length; a damaged one is removed. */
  #read(key: string): (Entry<T> & { chars: number }) | undefined {
    const text = this.#storage.getItem(key);
    if (text === null) return undefined;
    try {
      const entry = JSON.parse(text) as Entry<T>;
      if (typeof entry?.expiresAt === 'number' && typeof entry.storedAt === 'number') {
        return { ...entry, chars: text.length };
      }
    } catch {
      // Not ours or damaged: dropped below.
    }
    this.#storage.removeItem(key);
    return undefined;
  }

  /** Drops expired entries, then the oldest, until one more entry of `size` characters fits. */
  #makeRoom(size: number): void {
    const now = this.#now();
    const live: Array<{ key: string; storedAt: number; chars: number }> = [];
    for (const key of this.#keys()) {
      const entry = this.#read(key);
      if (!entry) continue;
      if (entry.expiresAt <= now) this.#storage.removeItem(key);
      else live.push({ key, storedAt: entry.storedAt, chars: key.length + entry.chars });
    }
    live.sort((a, b) => a.storedAt - b.storedAt);
    let chars = live.reduce((sum, e) => sum + e.chars, 0);
    while (live.length > 0 && (live.length + 1 > this.maxEntries || chars + size > this.maxChars)) {
      const oldest = live.shift()!;
      this.#storage.removeItem(oldest.key);
      chars -= oldest.chars;
    }
  }
}
