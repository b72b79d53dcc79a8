/**
 * The table of a chain. `seq` is the record's position (its id) and the primary key: an appender
 * writes seq = head + 1, so if two appenders ever read the same head (serialisation failed), only
 * one insert succeeds and the chain cannot fork. Timestamps are ISO strings compared as text
 * (byte order: `COLLATE "C"` on PostgreSQL).
 */
import type { SqlDatabase } from '../../runtime/index.ts';

export const TABLE_PATTERN = '^[A-Za-z_][A-Za-z0-9_]{0,62}$';

export async function createTable(db: SqlDatabase, table: string): Promise<void> {
  if (!new RegExp(TABLE_PATTERN).test(table)) throw new Error(`invalid audit table name "${table}"`);
  const [seq, text] = db.driver === 'postgres' ? ['BIGINT', 'TEXT COLLATE "C"'] : ['INTEGER', 'TEXT'];
  const ddl = `
    CREATE TABLE IF NOT EXISTS ${table} (
      seq ${seq} PRIMARY KEY,
      timestamp ${text} NOT NULL,
      request_id TEXT NOT NULL,
      tenant ${text} NOT NULL,
      action TEXT NOT NULL,
      rule TEXT NOT NULL,
      regulation TEXT NOT NULL,
      phase TEXT NOT NULL,
      details TEXT NOT NULL,
      prev_hash TEXT NOT NULL,
      hash TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS ${table}_timestamp ON ${table} (timestamp, seq);
    CREATE INDEX IF NOT EXISTS ${table}_tenant ON ${table} (tenant, seq);`;
  if (db.driver === 'sqlite') return db.script(ddl);
  // Concurrent CREATE ... IF NOT EXISTS can collide on PostgreSQL's catalog: serialise it.
  await db.transaction(
    async (tx) => {
      for (const statement of ddl.split(';').filter((s) => s.trim())) await tx.exec(statement);
    },
    { serialize: `switchyard:audit:${table}` },
  );
}
