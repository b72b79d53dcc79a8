/**
 * Storage figures for the gauges and `stats --storage`: what the store reports (data, index and
 * WAL bytes, entities per type) plus the free space of the disk holding a SQLite file. Kept for
 * a few seconds: counting entities per type reads the whole table, a scrape should not.
 */
import { statfs } from 'node:fs/promises';
import type { EntityStore } from '../../runtime/index.ts';
import type { StorageSnapshot } from './metrics.ts';

export class StorageSampler {
  private cached: { at: number; value: Promise<StorageSnapshot> } | undefined;

  /**
   * `dataDir`: directory of the SQLite file, for free space; undefined for PostgreSQL, whose
   * disk is the server's.
   */
  constructor(
    private readonly store: EntityStore,
    private readonly dataDir: string | undefined,
    private readonly ttlMs = 5000,
  ) {}

  snapshot(): Promise<StorageSnapshot> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > this.ttlMs) {
      const value = this.read();
      this.cached = { at: now, value };
      // A failed read is not kept: the next scrape tries again.
      value.catch(() => {
        if (this.cached?.value === value) this.cached = undefined;
      });
    }
    return this.cached.value;
  }

  /** Sizes and free space only (no per-type counts), read now. */
  async sizes(): Promise<Omit<StorageSnapshot, 'types'>> {
    const [sizes, freeBytes] = await Promise.all([this.store.storageStats(), this.freeBytes()]);
    return { ...sizes, freeBytes };
  }

  private async read(): Promise<StorageSnapshot> {
    const [sizes, types, freeBytes] = await Promise.all([
      this.store.storageStats(),
      this.store.typeStats(),
      this.freeBytes(),
    ]);
    return { ...sizes, freeBytes, types };
  }

  private async freeBytes(): Promise<number | undefined> {
    if (!this.dataDir) return undefined;
    try {
      const s = await statfs(this.dataDir);
      return Number(s.bavail) * Number(s.bsize);
    } catch {
      return undefined;
    }
  }
}
