/**
 * Sizes for the `db_entity_*` and `db_storage_*` gauges.
 *
 * typeStats: count and stored data bytes per type (SQLite: bytes of the JSON text; PostgreSQL:
 * `pg_column_size` of the JSONB, i.e. as stored, maybe compressed).
 *
 * storageStats, for the store's own tables (other tables may share the database):
 * - SQLite: `dbstat` (when compiled in) gives the pages of each table and index; without it,
 *   data is the whole file (`page_count * page_size`) and index size is unknown. WAL is the size
 *   of the `-wal` file.
 * - PostgreSQL: `pg_table_size` (heap + TOAST) and `pg_indexes_size`; the WAL is the server's,
 *   not the store's, so it is undefined.
 */
import { statSync } from 'node:fs';
import type { EntityTables } from './entity-schema.ts';
import type { SqlDatabase } from './types.ts';

export async function typeStats(
  db: SqlDatabase,
  t: EntityTables,
): Promise<Array<{ type: string; count: number; bytes: number }>> {
  const size = db.driver === 'postgres' ? 'pg_column_size(data)' : 'LENGTH(CAST(data AS BLOB))';
  const rows = await db.query<{ type: string; n: number | string; bytes: number | string | null }>(
    `SELECT type, COUNT(*) AS n, SUM(${size}) AS bytes FROM ${t.entities} GROUP BY type ORDER BY type`,
  );
  return rows.map((r) => ({ type: r.type, count: Number(r.n), bytes: Number(r.bytes ?? 0) }));
}

export interface StorageStats {
  dataBytes?: number;
  indexBytes?: number;
  walBytes?: number;
}

export async function storageStats(db: SqlDatabase, t: EntityTables): Promise<StorageStats> {
  const tables = [t.entities, t.changes, t.meta];
  if (db.driver === 'postgres') {
    const [row] = await db.query<{ data: string | number | null; idx: string | number | null }>(
      `SELECT SUM(pg_table_size(to_regclass(n))) AS data, SUM(pg_indexes_size(to_regclass(n))) AS idx
        FROM unnest(ARRAY[$1::text, $2::text, $3::text]) AS n`,
      tables,
    );
    return { dataBytes: Number(row?.data ?? 0), indexBytes: Number(row?.idx ?? 0), walBytes: undefined };
  }
  const files = await db.query<{ name: string; file: string }>('PRAGMA database_list');
  const file = files.find((f) => f.name === 'main')?.file;
  const walBytes = file ? fileSize(`${file}-wal`) : undefined;
  try {
    const objects = await db.query<{ name: string; type: string }>(
      `SELECT name, type FROM sqlite_master WHERE tbl_name IN ($1, $2, $3) AND type IN ('table', 'index')`,
      tables,
    );
    const kind = new Map(objects.map((o) => [o.name, o.type]));
    const pages = await db.query<{ name: string; pgsize: number }>(
      `SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE`,
    );
    let dataBytes = 0;
    let indexBytes = 0;
    for (const p of pages) {
      if (kind.get(p.name) === 'table') dataBytes += Number(p.pgsize);
      else if (kind.get(p.name) === 'index') indexBytes += Number(p.pgsize);
    }
    return { dataBytes, indexBytes, walBytes };
  } catch {
    // No dbstat in this SQLite build: the whole file is the best estimate of the data.
    const [count] = await db.query<{ page_count: number }>('PRAGMA page_count');
    const [size] = await db.query<{ page_size: number }>('PRAGMA page_size');
    return { dataBytes: Number(count?.page_count ?? 0) * Number(size?.page_size ?? 0), walBytes };
  }
}

/** A file's size, 0 when it does not exist (no WAL yet, or checkpointed away). */
function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
