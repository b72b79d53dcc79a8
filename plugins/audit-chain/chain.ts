/**
 * The chain over a SQL table: appends, queries and verification.
 *
 * Appending: every append reads the head and inserts its records inside one transaction that is
 * serialised across processes (SQLite: the write lock of BEGIN IMMEDIATE; PostgreSQL: an advisory
 * lock on the table's name), so the chain stays linear however many gateways append. An append
 * resolves only after its commit. Appends that arrive while a commit is in progress are written
 * together in the next transaction (group commit): one fsync for many records under load.
 *
 * Verifying: rows are read in batches of VERIFY_BATCH by primary key, never all at once; the next
 * batch is fetched while the current one is hashed.
 */
import type { SqlDatabase } from '../../runtime/index.ts';
import {
  type AuditChain,
  type AuditEntry,
  type AuditPage,
  type AuditQuery,
  type AuditRecord,
  type AuditSettings,
  GENESIS_HASH,
  type VerifyRange,
  type VerifyResult,
} from './api.ts';
import { fromRow, normaliseEntry, type RecordRow, recordHash, rowColumns, rowHash, toRow } from './record.ts';

const VERIFY_BATCH = 10_000;
/** Records per transaction when appends pile up. */
const MAX_GROUP = 1000;
/** Rows per INSERT statement (11 parameters each). */
const INSERT_ROWS = 200;

interface Pending {
  entries: ReturnType<typeof normaliseEntry>[];
  resolve(records: AuditRecord[]): void;
  reject(err: unknown): void;
}

export interface OpenedChain {
  chain: AuditChain;
  /** Waits for appends in progress, then closes the database. */
  close(): Promise<void>;
}

export function createAuditChain(db: SqlDatabase, settings: AuditSettings): OpenedChain {
  const t = settings.table;
  const lockKey = `switchyard:audit:${t}`;
  const queue: Pending[] = [];
  /** The loop writing the queue, while it runs (at most one per process and chain). */
  let draining: Promise<void> | undefined;

  /** Writes a group of appends in one serialised transaction, linked to the current head. */
  async function write(group: Pending[]): Promise<AuditRecord[][]> {
    return db.transaction(
      async (tx) => {
        const [head] = await tx.query<{ seq: number | string; hash: string; timestamp: string }>(
          `SELECT seq, hash, timestamp FROM ${t} ORDER BY seq DESC LIMIT 1`,
        );
        let seq = head ? Number(head.seq) : 0;
        let prev = head?.hash ?? GENESIS_HASH;
        // Never earlier than the head: a time range is then one contiguous stretch of the chain.
        const now = new Date().toISOString();
        const timestamp = head && head.timestamp > now ? head.timestamp : now;
        const out = group.map((p) =>
          p.entries.map((fields) => {
            const unhashed = { id: String(++seq), timestamp, ...fields, prev_hash: prev };
            const record: AuditRecord = { ...unhashed, hash: recordHash(unhashed) };
            prev = record.hash;
            return record;
          }),
        );
        const rows = out.flat();
        for (let i = 0; i < rows.length; i += INSERT_ROWS) {
          const chunk = rows.slice(i, i + INSERT_ROWS);
          const values = chunk.map((_, r) => `(${rowPlaceholders(r * 11)})`).join(', ');
          await tx.exec(`INSERT INTO ${t} (${rowColumns}) VALUES ${values}`, chunk.flatMap(toRow));
        }
        return out;
      },
      { serialize: lockKey },
    );
  }

  async function drain(): Promise<void> {
    try {
      while (queue.length > 0) {
        const group: Pending[] = [];
        let size = 0;
        while (queue.length > 0 && (group.length === 0 || size + queue[0]!.entries.length <= MAX_GROUP)) {
          const p = queue.shift()!;
          group.push(p);
          size += p.entries.length;
        }
        try {
          const records = await write(group);
          for (const [i, p] of group.entries()) p.resolve(records[i]!);
        } catch (err) {
          for (const p of group) p.reject(err);
        }
      }
    } finally {
      // Reached in the same tick the queue was seen empty, so no later append is left unwritten.
      draining = undefined;
    }
  }

  function appendAll(entries: readonly AuditEntry[]): Promise<AuditRecord[]> {
    let normalised: Pending['entries'];
    try {
      normalised = entries.map(normaliseEntry);
    } catch (err) {
      return Promise.reject(err);
    }
    if (normalised.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      queue.push({ entries: normalised, resolve, reject });
      draining ??= drain();
    });
  }

  async function query(q: AuditQuery = {}): Promise<AuditPage> {
    const where: string[] = [];
    const params: Array<string | number> = [];
    const add = (condition: string, value: string) => {
      params.push(value);
      where.push(condition.replace('?', `$${params.length}`));
    };
    if (q.start !== undefined) add('timestamp >= ?', q.start);
    if (q.end !== undefined) add('timestamp < ?', q.end);
    if (q.tenant !== undefined) add('tenant = ?', q.tenant);
    if (q.action !== undefined) add('action = ?', q.action);
    const clause = where.length > 0 ? `WHERE ${where.join(' AND ')}` : '';
    const limit = q.limit ?? 100;
    const offset = q.offset ?? 0;
    const [count] = await db.query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${t} ${clause}`, params);
    const rows = await db.query<RecordRow>(
      `SELECT ${rowColumns} FROM ${t} ${clause} ORDER BY seq LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, limit, offset],
    );
    return { records: rows.map(fromRow), total: Number(count?.n ?? 0) };
  }

  /** First and last seq of the records in a time range (the whole chain without one). */
  async function bounds(range: VerifyRange): Promise<{ first: number; last: number } | undefined> {
    const first =
      range.start === undefined
        ? await db.query<{ seq: number | string | null }>(`SELECT MIN(seq) AS seq FROM ${t}`)
        : await db.query<{ seq: number | string }>(
            `SELECT seq FROM ${t} WHERE timestamp >= $1 ORDER BY timestamp, seq LIMIT 1`,
            [range.start],
          );
    const last =
      range.end === undefined
        ? await db.query<{ seq: number | string | null }>(`SELECT MAX(seq) AS seq FROM ${t}`)
        : await db.query<{ seq: number | string }>(
            `SELECT seq FROM ${t} WHERE timestamp < $1 ORDER BY timestamp DESC, seq DESC LIMIT 1`,
            [range.end],
          );
    const [a, b] = [first[0]?.seq, last[0]?.seq];
    if (a == null || b == null || Number(a) > Number(b)) return undefined;
    return { first: Number(a), last: Number(b) };
  }

  async function verify(range: VerifyRange = {}): Promise<VerifyResult> {
    const result: VerifyResult = {
      status: 'valid',
      records_verified: 0,
      chain_intact: true,
      first_hash: '',
      last_hash: '',
    };
    const span = await bounds(range);
    if (!span) return result;
    // The whole chain starts at the genesis; a range trusts the link of its first record.
    const ranged = range.start !== undefined || range.end !== undefined;
    let expectedPrev: string | undefined = ranged && span.first !== 1 ? undefined : GENESIS_HASH;
    // Batches are ranges of positions, not LIMITs: the plan stays a short index range scan even
    // on a table the planner has no statistics for yet.
    const batch = (from: number) => {
      const rows = db.query<RecordRow>(`SELECT ${rowColumns} FROM ${t} WHERE seq >= $1 AND seq <= $2 ORDER BY seq`, [
        from,
        Math.min(from + VERIFY_BATCH - 1, span.last),
      ]);
      rows.catch(() => {}); // a prefetched batch may be abandoned at a break; it is awaited otherwise
      return rows;
    };
    let from = span.first;
    let next: Promise<RecordRow[]> | undefined = batch(from);
    while (next) {
      const rows: RecordRow[] = await next;
      // Fetch the next batch while this one is hashed.
      from += VERIFY_BATCH;
      next = from <= span.last ? batch(from) : undefined;
      for (const row of rows) {
        if (result.records_verified === 0) result.first_hash = row.hash;
        const reason =
          expectedPrev !== undefined && row.prev_hash !== expectedPrev
            ? 'prev_hash_mismatch'
            : rowHash(row) !== row.hash
              ? 'hash_mismatch'
              : undefined;
        if (reason) {
          return { ...result, status: 'broken', chain_intact: false, broken_at: { id: String(row.seq), reason } };
        }
        result.records_verified++;
        result.last_hash = row.hash;
        expectedPrev = row.hash;
      }
    }
    return result;
  }

  return {
    chain: {
      settings,
      appendAll,
      append: async (entry) => (await appendAll([entry]))[0]!,
      query,
      verify,
    },
    async close() {
      await draining;
      await db.close();
    },
  };
}

/** `$n+1, ..., $n+11` for one row of the INSERT. */
function rowPlaceholders(offset: number): string {
  return Array.from({ length: 11 }, (_, i) => `$${offset + i + 1}`).join(', ');
}
