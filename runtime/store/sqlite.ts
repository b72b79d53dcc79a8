/**
 * SQLite driver (better-sqlite3): WAL journal, configurable `synchronous`. better-sqlite3 is
 * synchronous, so the statements of concurrent async callers are queued on one in-process lock
 * per database file (shared by every connection of the process to that file): a transaction's
 * statements are never interleaved with anyone else's, and two connections of one process never
 * wait for each other's write lock (which would block the event loop for good). Across processes,
 * `BEGIN IMMEDIATE` takes the database's write lock, waiting up to the busy timeout — blocking
 * the event loop meanwhile, as better-sqlite3 does.
 */
import { resolve } from 'node:path';
import Database, { type Statement } from 'better-sqlite3';
import type { SqlDatabase, SqlExecutor, SqliteOptions, SqlParam } from './types.ts';

/** `$n` placeholders outside string literals and quoted identifiers. */
const token = /'(?:[^']|'')*'|"(?:[^"]|"")*"|\$(\d+)/g;

interface Prepared {
  statement: Statement;
  /** For each `?` of the rewritten SQL, the index of its value in the `$n` parameter list. */
  order: number[];
}

/** Rewrites `$1 .. $n` to positional `?`, remembering which value each `?` takes. */
export function toPositional(sql: string): { text: string; order: number[] } {
  const order: number[] = [];
  const text = sql.replace(token, (match: string, n: string | undefined) => {
    if (n === undefined) return match;
    order.push(Number(n) - 1);
    return '?';
  });
  return { text, order };
}

const STATEMENT_CACHE_SIZE = 500;

type Lock = <T>(fn: () => Promise<T>) => Promise<T>;
const fileLocks = new Map<string, Lock>();

/** The in-process lock of a database file: runs the functions given to it one at a time. */
function fileLock(path: string): Lock {
  const key = path === ':memory:' ? `:memory:${fileLocks.size}` : resolve(path);
  let lock = fileLocks.get(key);
  if (!lock) {
    let tail: Promise<unknown> = Promise.resolve();
    lock = <T>(fn: () => Promise<T>): Promise<T> => {
      const run = tail.then(fn);
      tail = run.catch(() => {});
      return run;
    };
    fileLocks.set(key, lock);
  }
  return lock;
}

export function openSqlite(options: SqliteOptions): SqlDatabase {
  const db = new Database(options.path, { timeout: options.busy_timeout_ms ?? 15000 });
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
  if (options.cache_size_mb !== undefined) {
    // A negative cache_size is in KiB rather than pages.
    if (!(options.cache_size_mb > 0)) throw new Error('cache_size_mb must be a positive number');
    db.pragma(`cache_size = ${-Math.round(options.cache_size_mb * 1024)}`);
  }
  const cache = new Map<string, Prepared>();

  // One prepared statement per SQL text. Bounded, as texts vary with the shape of a query (e.g.
  // the length of an IN list): past the bound the oldest goes (prepared again if still in use;
  // not reordered on every hit, which costs more than it saves).
  const prepare = (sql: string): Prepared => {
    let p = cache.get(sql);
    if (!p) {
      const { text, order } = toPositional(sql);
      p = { statement: db.prepare(text), order };
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
      cache.set(sql, p);
    }
    return p;
  };
  const bind = (p: Prepared, params: readonly SqlParam[] = []) => p.order.map((i) => params[i]);

  // Direct execution: only ever called while holding the lock.
  const direct: SqlExecutor = {
    async query<T>(sql: string, params?: readonly SqlParam[]) {
      const p = prepare(sql);
      if (p.statement.reader) return p.statement.all(bind(p, params)) as T[];
      p.statement.run(bind(p, params));
      return [];
    },
    async exec(sql, params) {
      const p = prepare(sql);
      return p.statement.run(bind(p, params)).changes;
    },
  };

  // Prepared once: a transaction's own statements are then no parsing at all.
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const rollback = db.prepare('ROLLBACK');
  const locked = fileLock(options.path);
  let closed = false;

  return {
    driver: 'sqlite',
    query: (sql, params) => locked(() => direct.query(sql, params)),
    exec: (sql, params) => locked(() => direct.exec(sql, params)),
    script: (sql) =>
      locked(async () => {
        db.exec(sql);
      }),
    transaction: (fn, txOptions) =>
      locked(async () => {
        begin.run();
        try {
          const result = await fn(direct);
          const last = txOptions?.beforeCommit?.();
          if (last) db.exec(last);
          commit.run();
          return result;
        } catch (err) {
          if (db.inTransaction) rollback.run();
          throw err;
        }
      }),
    ping: () =>
      locked(async () => {
        if (closed) throw new Error('database is closed');
        db.prepare('SELECT 1').get();
      }),
    close: () =>
      locked(async () => {
        if (closed) return;
        closed = true;
        db.close();
      }),
  };
}
