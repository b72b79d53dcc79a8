/**
 * The change log: one row per mutation, written in the mutation's own transaction.
 *
 * A transaction buffers its change records and writes them all at its end, just before COMMIT,
 * holding the store's log lock only from then until the commit:
 *
 * - PostgreSQL (`changesSql`, sent with the COMMIT): `pg_advisory_xact_lock` on the store's key,
 *   then one INSERT of every record with `seq` = MAX(seq) + 1, + 2, ... The lock is released
 *   after the commit is visible, so the next holder's MAX(seq) (a new statement, a new snapshot)
 *   sees it: seq order is commit order and there are no gaps (a rolled-back transaction's seqs
 *   are taken again by the next one).
 * - SQLite (`insertChanges`): the whole transaction holds the database's write lock anyway
 *   (BEGIN IMMEDIATE).
 *
 * No deadlock: while holding the log lock a transaction only inserts fresh seqs (which only log
 * lock holders ever insert) and commits, so it never waits for a lock someone else holds. The
 * entity rows are written (and their row locks waited for) before the log lock is requested.
 *
 * A replica applies a primary's records with `applyChange`: the record's seq goes into the
 * replica's own log (so the replica can be followed in turn, and `lastSeq` is its position), and
 * `meta.applied_seq` moves in the same transaction, so a replica restarted at any point applies
 * each record exactly once.
 */
import { ReplicationGapError } from './entity-errors.ts';
import { dataPlaceholder, type EntityTables } from './entity-schema.ts';
import type { ChangeRecord } from './entity-types.ts';
import { advisoryKey, pgLiteral } from './postgres.ts';
import type { SqlDatabase, SqlExecutor } from './types.ts';

type Driver = SqlDatabase['driver'];

/**
 * A change record before it has its seq (taken when the transaction writes its log), its data
 * as the JSON text the mutation wrote (null for a delete): not encoded a second time.
 */
export type PendingChange = Omit<ChangeRecord, 'seq' | 'data'> & { json: string | null };

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

/**
 * Takes the log lock (PostgreSQL; held until commit or rollback) for `applyChange`, waiting as
 * long as it takes whatever lock timeout the transaction set. SQLite's transaction holds the
 * write lock already.
 */
async function lockLog(tx: SqlExecutor, driver: Driver, t: EntityTables): Promise<void> {
  if (driver !== 'postgres') return;
  await tx.exec(`SET LOCAL lock_timeout = DEFAULT; SELECT pg_advisory_xact_lock(${advisoryKey(t.lockKey)}::bigint)`);
}

/** The records as one JSON array, each `data` the mutation's JSON text as it is. */
function recordsJson(changes: readonly PendingChange[]): string {
  const str = JSON.stringify;
  const one = (c: PendingChange) =>
    `{"op":${str(c.op)},"type":${str(c.type)},"id":${c.id},"key":${str(c.key)},"version":${c.version},"data":${c.json ?? 'null'},"at":${str(c.at)}}`;
  return `[${changes.map(one).join(',')}]`;
}

/**
 * PostgreSQL: the SQL that writes a transaction's buffered change records, sent with its COMMIT
 * in one round trip (`beforeCommit`, types.ts): the log lock, then one INSERT of every record,
 * numbered in order from MAX(seq) + 1. Each statement of a simple query takes a new snapshot, so
 * the INSERT sees every commit made before the lock was granted. From the lock to the commit
 * there is no network round trip, so the lock is held about as long as the commit takes.
 * Undefined when the transaction changed nothing (it takes no lock).
 */
export function changesSql(t: EntityTables, changes: readonly PendingChange[]): string | undefined {
  if (changes.length === 0) return undefined;
  return `SET LOCAL lock_timeout = DEFAULT;
    SELECT pg_advisory_xact_lock(${advisoryKey(t.lockKey)}::bigint);
    INSERT INTO ${t.changes} (${CHANGE_COLUMNS})
      SELECT m.seq + c.n, c.op, c.type, c.id, c.key, c.version, c.data, c.at
      FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM ${t.changes}) m,
        ROWS FROM (jsonb_to_recordset(${pgLiteral(recordsJson(changes))}::jsonb)
          AS (op text, type text, id bigint, key text, version bigint, data jsonb, at text))
        WITH ORDINALITY AS c(op, type, id, key, version, data, at, n)`;
}

/**
 * SQLite: writes a transaction's buffered change records, in order, as its last statements (the
 * transaction holds the database's write lock from its start). No round trips: one cached
 * statement per record.
 */
export async function insertChanges(
  tx: SqlExecutor,
  t: EntityTables,
  changes: readonly PendingChange[],
): Promise<void> {
  const sql = insertSql('sqlite', t, `(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${t.changes})`);
  for (const c of changes) await tx.exec(sql, [c.op, c.type, c.id, c.key, c.version, c.json, c.at]);
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
  const [row] = await tx.query<{ applied: number | string | null; last: number | string | null }>(
    `SELECT (SELECT value FROM ${t.meta} WHERE name = 'applied_seq') AS applied,
      (SELECT MAX(seq) FROM ${t.changes}) AS last`,
  );
  return Math.max(Number(row?.applied ?? 0), Number(row?.last ?? 0));
}

/** Under the log lock, the record turned out applied already (by another writer): roll back. */
class Superseded extends Error {}

/**
 * Applies a primary's record in a transaction of its own. Skips a seq already applied; refuses
 * one past the next (a gap would lose the records between). The entity row is written first and
 * the log lock taken after it, as every writer does (see the top of this file).
 */
export async function applyChange(
  db: SqlDatabase,
  t: EntityTables,
  change: ChangeRecord,
): Promise<'applied' | 'skipped'> {
  const { driver } = db;
  try {
    return await db.transaction(async (tx) => {
      // A first look, before any write: skips and gaps are known at once.
      let at = await position(tx, t);
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
      await lockLog(tx, driver, t);
      if (driver === 'postgres') {
        // Again under the lock: another writer may have moved the log since the first look.
        // (SQLite's transaction has held the write lock from its start.)
        at = await position(tx, t);
        if (change.seq <= at) throw new Superseded();
        if (change.seq !== at + 1) throw new ReplicationGapError(at + 1, change.seq);
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
    });
  } catch (err) {
    if (err instanceof Superseded) return 'skipped';
    throw err;
  }
}
