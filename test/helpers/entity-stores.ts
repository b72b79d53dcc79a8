/**
 * Entity stores for tests that run one suite on both backends: SQLite (a temp file per store
 * name) and PostgreSQL at 127.0.0.1:5432 (a unique table prefix per store name, dropped after
 * the file; required when CI=true, else skipped with the reason shown). Stores opened here are
 * closed after the file. Call at the top level of a test file.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import {
  type EntityStore,
  type EntityStoreOptions,
  openEntityStore,
  openSqlDatabase,
  type SqlDatabase,
} from '../../runtime/index.ts';
import { dropEntitySchema } from '../../runtime/store/entity-schema.ts';
import type { PostgresOptions } from '../../runtime/store/types.ts';
import { PG_URL, tcpReachable } from './reachable.ts';

export type Driver = 'sqlite' | 'postgres';

export interface TestStores {
  skipPg: boolean;
  /** The temp directory of the SQLite files (removed after the file). */
  dir: string;
  backends: Array<{ name: Driver; skip: boolean }>;
  /** Table prefix of the store called `name` (same name: same tables). */
  prefix(driver: Driver, name: string): string;
  /** A store called `name` on its own connection or pool, like another process would open it. */
  open(
    driver: Driver,
    name: string,
    options?: EntityStoreOptions,
    pg?: Partial<PostgresOptions>,
    wrap?: (db: SqlDatabase) => SqlDatabase,
  ): Promise<EntityStore>;
}

/** `suite` names the skip message; `stem` starts the PostgreSQL table prefixes (unique per run). */
export async function entityTestStores(suite: string, stem: string): Promise<TestStores> {
  const pgUp = await tcpReachable(5432);
  const skipPg = !pgUp && process.env.CI !== 'true';
  if (skipPg) console.warn(`PostgreSQL ${suite} skipped: nothing at 127.0.0.1:5432`);
  const dir = mkdtempSync(join(tmpdir(), `sy-${stem}-`));
  const run = randomUUID().replace(/-/g, '').slice(0, 8);
  const pgPrefixes = new Set<string>();
  const opened: EntityStore[] = [];

  afterAll(async () => {
    for (const store of opened.splice(0)) await store.close().catch(() => {});
    if (pgUp && pgPrefixes.size > 0) {
      const db = await openSqlDatabase({ driver: 'postgres', url: PG_URL });
      for (const prefix of pgPrefixes) await dropEntitySchema(db, prefix);
      await db.close();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const prefix = (driver: Driver, name: string): string => {
    if (driver === 'sqlite') return 'entity_';
    const p = `${stem}_${run}_${name}_`;
    pgPrefixes.add(p);
    return p;
  };
  return {
    skipPg,
    dir,
    backends: [
      { name: 'sqlite', skip: false },
      { name: 'postgres', skip: skipPg },
    ],
    prefix,
    async open(driver, name, options = {}, pg = {}, wrap) {
      const db =
        driver === 'sqlite'
          ? await openSqlDatabase({ driver: 'sqlite', path: join(dir, `${name}.db`), synchronous: 'NORMAL' })
          : await openSqlDatabase({ driver: 'postgres', url: PG_URL, pool_size: 6, ...pg });
      const store = await openEntityStore(wrap ? wrap(db) : db, { tablePrefix: prefix(driver, name), ...options });
      opened.push(store);
      return store;
    },
  };
}
