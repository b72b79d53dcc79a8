/**
 * The change log: one row per mutation, written in the mutation's own transaction.
 *
 * `seq` is MAX(seq) + 1, taken while the transaction holds the store's write lock (SQLite:
 * BEGIN IMMEDIATE; PostgreSQL: the advisory lock every writing transaction takes first, see
 * entity-store.ts), and the lock is held until commit. So seq order is commit order and there
 * are no gaps: a rolled-back transaction's seq is taken again by the next one.
 *
 * A replica applies a primary's records with `applyChange`: the record's seq goes into the
 * replica's own log (so the replica can be followed in turn, and `lastSeq` is its position), and
 * `meta.applied_seq` moves in the same transaction, so a replica restarted at any point applies
 * each record exactly once.
 */
import { ReplicationGapError } from './entity-errors.ts';
import { dataPlaceholder, type EntityTables } from './entity-schema.ts';
import type { ChangeRecord } from './entity-types.ts';
import type { SqlDatabase, SqlExecutor } from './types.ts';

type Driver = SqlDatabase['driver'];

const CHANGE_COLUMNS = 'seq, op, type, id, key, version, data, at';

interface ChangeRow {
  seq: number | string;
  op: ChangeRecord['op'];
  type: string;
  id: number | string;
  key: string | null;
  version: number | string;
  data: string | Record<string, unknown> | null;
  at: string;
}

function toChange(row: ChangeRow): ChangeRecord {
  return {
    seq: Number(row.seq),
    op: row.op,
    type: row.type,
    id: Number(row.id),
    key: row.key,
    version: Number(row.version),
    data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data,
    at: row.at,
  };
}

function insertSql(driver: Driver, t: EntityTables, seqExpr: string): string {
  return `INSERT INTO ${t.changes} (${CHANGE_COLUMNS})
    VALUES (${seqExpr}, $1, $2, $3, $4, $5, ${dataPlaceholder(driver, 6)}, $7)`;
}

/** Appends a record for a mutation; call inside the mutation's transaction, holding the write lock. */
export async function appendChange(
  tx: SqlExecutor,
  driver: Driver,
  t: EntityTables,
  change: Omit<ChangeRecord, 'seq'>,
): Promise<void> {
  const data = change.data === null ? null : JSON.stringify(change.data);
  await tx.exec(insertSql(driver, t, `(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${t.changes})`), [
    change.op,
    change.type,
    change.id,
    change.key,
    change.version,
    data,
    change.at,
  ]);
}

export async function changesSince(
  db: SqlExecutor,
  t: EntityTables,
  afterSeq: number,
  limit: number,
): Promise<ChangeRecord[]> {
  const rows = await db.query<ChangeRow>(
    `SELECT ${CHANGE_COLUMNS} FROM ${t.changes} WHERE seq > $1 ORDER BY seq LIMIT $2`,
    [afterSeq, limit],
  );
  return rows.map(toChange);
}

export async function lastSeq(db: SqlExecutor, t: EntityTables): Promise<number> {
  const [row] = await db.query<{ seq: number | string | null }>(`SELECT MAX(seq) AS seq FROM ${t.changes}`);
  return Number(row?.seq ?? 0);
}

/** The replica's position: the last applied (or locally written) seq. */
async function position(tx: SqlExecutor, t: EntityTables): Promise<number> {
  const [meta] = await tx.query<{ value: number | string }>(`SELECT value FROM ${t.meta} WHERE name = 'applied_seq'`);
  return Math.max(Number(meta?.value ?? 0), await lastSeq(tx, t));
}

/**
 * Applies a primary's record inside `tx` (which holds the write lock). Skips a seq already
 * applied; refuses one past the next (a gap would lose the records between).
 */
export async function applyChangeTx(
  tx: SqlExecutor,
  driver: Driver,
  t: EntityTables,
  change: ChangeRecord,
): Promise<'applied' | 'skipped'> {
  const at = await position(tx, t);
  if (change.seq <= at) return 'skipped';
  if (change.seq !== at + 1) throw new ReplicationGapError(at + 1, change.seq);

  const data = change.data === null ? null : JSON.stringify(change.data);
  if (change.op === 'delete') {
    await tx.exec(`DELETE FROM ${t.entities} WHERE id = $1`, [change.id]);
  } else {
    // An update of a row the replica lacks (or a create it already has) still ends in the
    // primary's row: insert-or-replace by id, keeping the primary's id, version and timestamps.
    await tx.exec(
      `INSERT INTO ${t.entities} (id, type, key, version, created_at, updated_at, data)
        VALUES ($1, $2, $3, $4, $5, $5, ${dataPlaceholder(driver, 6)})
        ON CONFLICT (id) DO UPDATE SET type = excluded.type, key = excluded.key, version = excluded.version,
          updated_at = excluded.updated_at, data = excluded.data`,
      [change.id, change.type, change.key, change.version, change.at, data],
    );
    if (driver === 'postgres') {
      // Keep the id sequence ahead of the primary's ids, so a promoted replica never reuses one.
      await tx.query(
        `SELECT setval('${t.idSequence}', $1::bigint) FROM ${t.idSequence} WHERE last_value < $1::bigint OR NOT is_called`,
        [change.id],
      );
    }
  }
  await tx.exec(insertSql(driver, t, '$8'), [
    change.op,
    change.type,
    change.id,
    change.key,
    change.version,
    data,
    change.at,
    change.seq,
  ]);
  await tx.exec(`UPDATE ${t.meta} SET value = $1 WHERE name = 'applied_seq'`, [change.seq]);
  return 'applied';
}
