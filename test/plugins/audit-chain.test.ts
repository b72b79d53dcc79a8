/**
 * The audit chain on SQLite and PostgreSQL: record format and hash, linear appends, queries,
 * and verification that finds (and places) records edited, re-hashed or deleted behind the
 * service's back with plain SQL. PostgreSQL suites use a table of their own and drop it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AuditChain, GENESIS_HASH } from '../../plugins/audit-chain/api.ts';
import type { AuditChainOptions } from '../../plugins/audit-chain/resource.ts';
import { canonicalJson, openSqlDatabase, type SqlDatabase, sha256Hex } from '../../runtime/index.ts';
import { dropPgTables, openChain, PG_URL, skipPg, uniqueTable } from '../fixtures/audit-helpers.ts';

if (skipPg) console.warn('audit-chain PostgreSQL tests skipped: nothing at 127.0.0.1:5432');

const dir = mkdtempSync(join(tmpdir(), 'sy-audit-'));
const pgTables: string[] = [];
const closers: Array<() => Promise<void> | undefined> = [];
afterAll(async () => {
  for (const c of closers.splice(0)) await c();
  await dropPgTables(pgTables);
});

interface Backend {
  name: string;
  skip: boolean;
  /** Options of a fresh, empty chain. */
  options(): AuditChainOptions;
  /** A direct connection to the chain's database, as someone tampering with it would have. */
  raw(options: AuditChainOptions): Promise<SqlDatabase>;
}

const backends: Backend[] = [
  {
    name: 'sqlite',
    skip: false,
    options: () => ({ backend: 'sqlite', path: join(dir, `${uniqueTable('chain')}.db`) }),
    raw: (o) => openSqlDatabase({ driver: 'sqlite', path: o.path as string }),
  },
  {
    name: 'postgres',
    skip: skipPg,
    options: () => {
      const table = uniqueTable();
      pgTables.push(table);
      return { backend: 'postgres', url: PG_URL, table };
    },
    raw: () => openSqlDatabase({ driver: 'postgres', url: PG_URL }),
  },
];

async function fresh(b: Backend): Promise<{ chain: AuditChain; options: AuditChainOptions; raw: SqlDatabase }> {
  const options = b.options();
  const instance = await openChain(options);
  const raw = await b.raw(options);
  closers.push(
    () => instance.close?.(),
    () => raw.close(),
  );
  return { chain: instance.value, options, raw };
}

const entry = (n: number, extra: Record<string, unknown> = {}) => ({
  request_id: `req-${n}`,
  tenant: n % 2 ? 'acme' : 'globex',
  action: n % 3 ? 'block' : 'redact',
  rule: `rule-${n}`,
  regulation: 'GDPR',
  phase: 'ingress',
  details: { score: 0.5 + n / 100 },
  ...extra,
});

describe.each(backends)('audit chain on $name', (b) => {
  it.skipIf(b.skip)('appends records whose hash covers the previous hash and the canonical record', async () => {
    const { chain } = await fresh(b);
    const first = await chain.append(entry(1));
    const second = await chain.append({ request_id: 'req-2', action: 'flag' });
    expect(first).toMatchObject({ id: '1', prev_hash: GENESIS_HASH, tenant: 'acme', action: 'block', rule: 'rule-1' });
    expect(first.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const { hash, ...rest } = first;
    expect(hash).toBe(sha256Hex(GENESIS_HASH + canonicalJson(rest)));
    // Absent fields are empty strings; ids are the chain positions.
    expect(second).toMatchObject({ id: '2', prev_hash: first.hash, tenant: '', rule: '', regulation: '', phase: '' });
    expect(second.timestamp >= first.timestamp).toBe(true);
    await expect(chain.append({ request_id: '', action: 'block' })).rejects.toThrow(/request_id/);
  });

  it.skipIf(b.skip)('keeps one linear chain under concurrent appends, each acknowledged record stored', async () => {
    const { chain } = await fresh(b);
    const acked = await Promise.all(Array.from({ length: 200 }, (_, i) => chain.append(entry(i))));
    expect(new Set(acked.map((r) => r.id)).size).toBe(200);
    const { records, total } = await chain.query({ limit: 1000 });
    expect(total).toBe(200);
    expect(records.map((r) => r.id)).toEqual(Array.from({ length: 200 }, (_, i) => String(i + 1)));
    for (let i = 1; i < records.length; i++) expect(records[i]!.prev_hash).toBe(records[i - 1]!.hash);
    expect(await chain.verify()).toEqual({
      status: 'valid',
      records_verified: 200,
      chain_intact: true,
      first_hash: records[0]!.hash,
      last_hash: records[199]!.hash,
    });
  });

  it.skipIf(b.skip)('cannot fork: a second record at a position already taken is refused', async () => {
    const { chain, options, raw } = await fresh(b);
    const [, second] = await chain.appendAll([entry(1), entry(2)]);
    // What an appender that read a stale head (serialisation failed) would try to write.
    const rival = [2, second!.timestamp, 'rival', '', 'allow', '', '', '', '{}', second!.prev_hash, 'f'.repeat(64)];
    await expect(
      raw.exec(
        `INSERT INTO ${options.table ?? 'audit_records'} (seq, timestamp, request_id, tenant, action, rule, regulation, phase, details, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        rival,
      ),
    ).rejects.toThrow(/unique|duplicate/i);
    expect((await chain.verify()).status).toBe('valid');
  });

  it.skipIf(b.skip)('filters by tenant, action and time, pages oldest first, and counts the total', async () => {
    const { chain } = await fresh(b);
    await chain.appendAll(Array.from({ length: 12 }, (_, i) => entry(i + 1)));
    const acme = await chain.query({ tenant: 'acme', limit: 2, offset: 1 });
    expect(acme.total).toBe(6);
    expect(acme.records.map((r) => r.request_id)).toEqual(['req-3', 'req-5']);
    const redacted = await chain.query({ action: 'redact' });
    expect(redacted.records.map((r) => r.rule)).toEqual(['rule-3', 'rule-6', 'rule-9', 'rule-12']);
    expect((await chain.query({ start: '2999-01-01T00:00:00.000Z' })).total).toBe(0);
    expect((await chain.query({ end: '2000-01-01T00:00:00.000Z' })).total).toBe(0);
    expect((await chain.query({ start: '2000-01-01T00:00:00.000Z', end: '2999-01-01T00:00:00.000Z' })).total).toBe(12);
  });

  it.skipIf(b.skip)('reports an edited record as a hash mismatch at that record', async () => {
    const { chain, options, raw } = await fresh(b);
    await chain.appendAll(Array.from({ length: 10 }, (_, i) => entry(i + 1)));
    await raw.exec(`UPDATE ${options.table ?? 'audit_records'} SET action = 'allow' WHERE seq = 4`);
    const result = await chain.verify();
    expect(result).toMatchObject({
      status: 'broken',
      chain_intact: false,
      records_verified: 3,
      broken_at: { id: '4', reason: 'hash_mismatch' },
    });
  });

  it.skipIf(b.skip)('reports an edited and re-hashed record at the link that no longer holds', async () => {
    const { chain, options, raw } = await fresh(b);
    const records = await chain.appendAll(Array.from({ length: 10 }, (_, i) => entry(i + 1)));
    const forged = { ...records[5]!, rule: 'nothing-to-see' };
    const { hash: _old, ...unhashed } = forged;
    const table = options.table ?? 'audit_records';
    await raw.exec(`UPDATE ${table} SET rule = $1, hash = $2 WHERE seq = 6`, [
      forged.rule,
      sha256Hex(forged.prev_hash + canonicalJson(unhashed)),
    ]);
    expect(await chain.verify()).toMatchObject({
      status: 'broken',
      records_verified: 6,
      last_hash: (await chain.query({ offset: 5, limit: 1 })).records[0]!.hash,
      broken_at: { id: '7', reason: 'prev_hash_mismatch' },
    });
  });

  it.skipIf(b.skip)('reports deleted records, in the middle and at the start of the chain', async () => {
    const { chain, options, raw } = await fresh(b);
    await chain.appendAll(Array.from({ length: 10 }, (_, i) => entry(i + 1)));
    const table = options.table ?? 'audit_records';
    await raw.exec(`DELETE FROM ${table} WHERE seq = 5`);
    expect((await chain.verify()).broken_at).toEqual({ id: '6', reason: 'prev_hash_mismatch' });
    await raw.exec(`DELETE FROM ${table} WHERE seq <= 4`);
    expect((await chain.verify()).broken_at).toEqual({ id: '6', reason: 'prev_hash_mismatch' });
  });

  it.skipIf(b.skip)('verifies a time range from its first record, trusting that record’s link', async () => {
    const { chain, options, raw } = await fresh(b);
    const early = await chain.appendAll(Array.from({ length: 5 }, (_, i) => entry(i + 1)));
    await new Promise((r) => setTimeout(r, 5));
    const late = await chain.appendAll(Array.from({ length: 5 }, (_, i) => entry(i + 6)));
    // Break the early part: a range over the late part still verifies.
    await raw.exec(`UPDATE ${options.table ?? 'audit_records'} SET tenant = 'x' WHERE seq = 2`);
    expect((await chain.verify()).broken_at).toEqual({ id: '2', reason: 'hash_mismatch' });
    const range = await chain.verify({ start: late[0]!.timestamp });
    expect(range).toEqual({
      status: 'valid',
      records_verified: 5,
      chain_intact: true,
      first_hash: late[0]!.hash,
      last_hash: late[4]!.hash,
    });
    expect((await chain.verify({ end: early[4]!.timestamp })).status).toBe('valid'); // end is exclusive here
    expect(await chain.verify({ start: '2999-01-01T00:00:00.000Z' })).toMatchObject({
      status: 'valid',
      records_verified: 0,
      first_hash: '',
    });
  });

  it.skipIf(b.skip)('reports health as connected, and disconnected once closed', async () => {
    const instance = await openChain(b.options());
    expect(await instance.health?.()).toMatchObject({ ok: true, status: 'connected' });
    await instance.close?.();
    expect(await instance.health?.()).toMatchObject({ ok: false, status: 'disconnected' });
  });
});

describe('audit chain files', () => {
  it('creates the SQLite directory, relative to the config file', async () => {
    const configDir = mkdtempSync(join(tmpdir(), 'sy-audit-cfg-'));
    const instance = await openChain({ path: './nested/dir/audit.db' }, configDir);
    closers.push(() => instance.close?.());
    expect(instance.describe?.()).toMatchObject({ path: join(configDir, 'nested/dir/audit.db'), backend: 'sqlite' });
    expect((await instance.value.append({ request_id: 'r', action: 'flag' })).id).toBe('1');
  });

  it('counts appends and their latency in the service metrics', async () => {
    const instance = await openChain({ path: join(dir, 'metrics.db') });
    closers.push(() => instance.close?.());
    await instance.value.appendAll([entry(1), entry(2)]);
    const text = await instance.env.metrics.registry.metrics();
    expect(text).toMatch(/switchyard_audit_appends_total\{result="ok"\} 2/);
    expect(text).toMatch(/switchyard_audit_append_duration_seconds_count 1/);
  });
});
