/**
 * The cache of /v1/process results, keyed by URL and the resolved config: an in-memory LRU of
 * the serialised answers (bounded by entries and bytes, optional TTL), and optionally a table in
 * SQLite (a file path) or PostgreSQL (a postgres:// URL) that survives restarts and, with
 * PostgreSQL, is shared by several gateway processes. The table is best effort: a failing
 * database is logged and the request goes on without it.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { type FromSchema, type JsonSchema, openSqlDatabase, type SqlDatabase } from '../../runtime/index.ts';

/** The `cache` option of `embed-process` (defaulted to `{}`, so its own defaults always apply). */
export const cacheSchema = {
  type: 'object',
  additionalProperties: false,
  default: {},
  properties: {
    max_entries: { type: 'integer', minimum: 1, default: 1000 },
    max_bytes: {
      type: 'integer',
      minimum: 1,
      default: 256 * 1024 * 1024,
      description: 'Memory for cached answers (their JSON size).',
    },
    ttl_seconds: { type: 'integer', minimum: 0, default: 0, description: '0: entries never expire (LRU only).' },
    persist: {
      type: 'string',
      description: 'Also keep results in a table: a SQLite file path (relative to the config) or a postgres:// URL.',
    },
  },
} as const satisfies JsonSchema;
export type ProcessCacheOptions = FromSchema<typeof cacheSchema>;
const TABLE = 'embed_process_cache';

export class ProcessCache {
  private constructor(
    private readonly memory: LRUCache<string, string>,
    private readonly db: SqlDatabase | undefined,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {}

  /** `resolvePath` resolves a relative SQLite path (against the config file's directory). */
  static async open(
    options: ProcessCacheOptions,
    resolvePath: (path: string) => string,
    logger: Logger,
  ): Promise<ProcessCache> {
    const ttlMs = options.ttl_seconds * 1000;
    const memory = new LRUCache<string, string>({
      max: options.max_entries,
      maxSize: options.max_bytes,
      // UTF-16 code units, a fair measure of what V8 keeps for a (mostly Latin-1) JSON string.
      sizeCalculation: (value) => Math.max(1, value.length),
      ...(ttlMs > 0 ? { ttl: ttlMs } : {}),
    });
    let db: SqlDatabase | undefined;
    if (options.persist) {
      db = /^postgres(ql)?:\/\//.test(options.persist)
        ? await openSqlDatabase({ driver: 'postgres', url: options.persist })
        : await openSqlDatabase({ driver: 'sqlite', path: resolvePath(options.persist), synchronous: 'NORMAL' });
      await db.script(
        `CREATE TABLE IF NOT EXISTS ${TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at BIGINT NOT NULL)`,
      );
    }
    return new ProcessCache(memory, db, ttlMs, logger);
  }

  async get(key: string): Promise<string | undefined> {
    const hit = this.memory.get(key);
    if (hit !== undefined || !this.db) return hit;
    try {
      const rows = await this.db.query<{ value: string; created_at: number | string }>(
        `SELECT value, created_at FROM ${TABLE} WHERE key = $1`,
        [key],
      );
      const row = rows[0];
      if (!row) return undefined;
      if (this.ttlMs > 0 && Number(row.created_at) < Date.now() - this.ttlMs) return undefined;
      this.memory.set(key, row.value);
      return row.value;
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'process cache: read from the database failed');
      return undefined;
    }
  }

  async set(key: string, value: string): Promise<void> {
    this.memory.set(key, value);
    if (!this.db) return;
    try {
      const now = Date.now();
      await this.db.exec(
        `INSERT INTO ${TABLE} (key, value, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at`,
        [key, value, now],
      );
      if (this.ttlMs > 0) await this.db.exec(`DELETE FROM ${TABLE} WHERE created_at < $1`, [now - this.ttlMs]);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'process cache: write to the database failed');
    }
  }

  stats(): { entries: number; bytes: number; persisted: boolean } {
    return { entries: this.memory.size, bytes: this.memory.calculatedSize, persisted: this.db !== undefined };
  }

  async close(): Promise<void> {
    await this.db?.close();
  }
}
