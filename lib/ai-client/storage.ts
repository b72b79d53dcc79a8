/**
 * Where the config and the response cache are kept. The interface is the synchronous part of the
 * Web Storage API that the library needs, so `window.localStorage` fits as it is; Node gets an
 * in-memory adapter here and a file-backed one in file-storage.ts (kept apart: it imports node:fs
 * and the browser bundle must not).
 */
export interface StorageAdapter {
  getItem(key: string): string | null;
  /** May throw when the store is full (a browser's QuotaExceededError). */
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
  /** Every key currently stored. */
  keys(): string[];
}

export class MemoryStorage implements StorageAdapter {
  readonly #items = new Map<string, string>();

  getItem(key: string): string | null {
    return this.#items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.#items.set(key, String(value));
  }
  removeItem(key: string): void {
    this.#items.delete(key);
  }
  keys(): string[] {
    return [...this.#items.keys()];
  }
}

/** The subset of the DOM `Storage` interface used here (declared so no DOM typings are needed). */
export interface WebStorageLike {
  readonly length: number;
  key(index: number): string | null;
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** Adapts `window.localStorage` (or any Web Storage object). */
export function webStorage(storage: WebStorageLike): StorageAdapter {
  return {
    getItem: (key) => storage.getItem(key),
    setItem: (key, value) => storage.setItem(key, value),
    removeItem: (key) => storage.removeItem(key),
    keys() {
      const keys: string[] = [];
      for (let i = 0; i < storage.length; i++) {
        const key = storage.key(i);
        if (key !== null) keys.push(key);
      }
      return keys;
    },
  };
}

/** The browser's local storage when there is one, else a fresh in-memory store. */
export function defaultStorage(): StorageAdapter {
  try {
    const local = (globalThis as { localStorage?: WebStorageLike }).localStorage;
    if (local && typeof local.getItem === 'function') return webStorage(local);
  } catch {
    // Access can throw (storage disabled by the user, opaque origin): fall back to memory.
  }
  return new MemoryStorage();
}
