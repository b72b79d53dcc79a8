/**
 * The `audit-chain` resource: a hash-chained audit trail in SQLite (default, a file next to the
 * config) or PostgreSQL (shared by several gateway processes).
 *
 *   resources:
 *     audit: { type: audit-chain }                                   # ./data/audit.db
 *     audit: { type: audit-chain, backend: postgres, url: "${AUDIT_DATABASE_URL}" }
 *
 * Health is `connected` while the database answers a query.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  defineResource,
  type FromSchema,
  type JsonSchema,
  latencyBuckets,
  openSqlDatabase,
  type SqlDatabase,
} from '../../runtime/index.ts';
import type { AuditChain, AuditSettings } from './api.ts';
import { createAuditChain } from './chain.ts';
import { createTable, TABLE_PATTERN } from './schema.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    backend: { enum: ['sqlite', 'postgres'], default: 'sqlite' },
    path: {
      type: 'string',
      minLength: 1,
      default: './data/audit.db',
      description: 'sqlite: database file, relative to the config file (its directory is created)',
    },
    synchronous: {
      enum: ['FULL', 'NORMAL'],
      default: 'FULL',
      description: 'sqlite: FULL = an acknowledged record survives power loss; NORMAL = survives a crash only',
    },
    url: { type: 'string', minLength: 1, description: 'postgres: connection string' },
    pool_size: { type: 'integer', minimum: 1, default: 10, description: 'postgres: connections' },
    table: { type: 'string', pattern: TABLE_PATTERN, default: 'audit_records' },
    record: {
      enum: ['non-allow', 'all'],
      default: 'non-allow',
      description: 'What the audit stage records: every decision but a plain allow, or all requests',
    },
    store_prompt: {
      type: 'boolean',
      default: false,
      description: 'Store the request prompt in details.prompt (raw prompts are not stored by default)',
    },
  },
  // backend postgres needs a url
  anyOf: [{ properties: { backend: { const: 'sqlite' } } }, { required: ['url'], properties: { url: true } }],
} as const satisfies JsonSchema;

type Options = FromSchema<typeof optionsSchema>;
/** Options as a config (or a test) writes them: defaulted ones may be left out. */
export type AuditChainOptions = FromSchema<typeof optionsSchema, 'written'>;

export default defineResource<Options, AuditChain>({
  type: 'audit-chain',
  description: 'Hash-chained, append-only audit trail of decisions (SQLite file or PostgreSQL)',
  options: optionsSchema,
  async create(options, env) {
    const settings: AuditSettings = {
      backend: options.backend,
      table: options.table,
      record: options.record,
      store_prompt: options.store_prompt,
    };
    let db: SqlDatabase;
    let where: Record<string, unknown>;
    if (settings.backend === 'postgres') {
      if (!options.url) throw new Error('audit-chain: backend postgres needs a url');
      db = await openSqlDatabase({ driver: 'postgres', url: options.url, pool_size: options.pool_size });
      where = { database: describeUrl(options.url) };
    } else {
      const path = env.resolvePath(options.path);
      mkdirSync(dirname(path), { recursive: true });
      db = await openSqlDatabase({ driver: 'sqlite', path, synchronous: options.synchronous });
      where = { path };
    }
    try {
      await createTable(db, settings.table);
    } catch (err) {
      await db.close();
      throw new Error(`audit-chain: cannot prepare table ${settings.table}: ${(err as Error).message}`);
    }
    const opened = createAuditChain(db, settings);

    const appends = env.metrics.counter({
      name: 'switchyard_audit_appends_total',
      help: 'Audit records appended, by result (ok: committed; error: not written)',
      labelNames: ['result'] as const,
    });
    const latency = env.metrics.histogram({
      name: 'switchyard_audit_append_duration_seconds',
      help: 'Time from an append call to its commit (queueing included)',
      buckets: latencyBuckets,
    });
    const chain: AuditChain = {
      ...opened.chain,
      async appendAll(entries) {
        const started = performance.now();
        try {
          const records = await opened.chain.appendAll(entries);
          appends.inc({ result: 'ok' }, records.length);
          latency.observe((performance.now() - started) / 1000);
          return records;
        } catch (err) {
          appends.inc({ result: 'error' }, entries.length);
          throw err;
        }
      },
      async append(entry) {
        return (await chain.appendAll([entry]))[0]!;
      },
    };
    const describe = () => ({ ...settings, ...where });
    env.logger.info(describe(), 'audit chain open');
    return {
      value: chain,
      describe,
      async health() {
        try {
          await db.ping();
          return { ok: true, status: 'connected', detail: describe() };
        } catch (err) {
          return { ok: false, status: 'disconnected', error: (err as Error).message };
        }
      },
      close: () => opened.close(),
    };
  },
});

/** host:port/database of a connection string, without credentials (for describe and logs). */
function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'postgres';
  }
}
