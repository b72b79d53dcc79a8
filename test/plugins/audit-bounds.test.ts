/**
 * Audit records are bounded (issue 29, item 8): whatever a stage puts in an entry, the record the
 * chain writes (SQLite, through the audit-chain resource) stays small; every value cut keeps its
 * original length and sha256, the chain still verifies, and small records are written unchanged.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditChain } from '../../plugins/audit-chain/api.ts';
import { maxDetailsBytes } from '../../plugins/audit-chain/bounds.ts';
import { openSqlDatabase, type SqlDatabase, sha256Hex } from '../../runtime/index.ts';
import { openChain } from '../fixtures/audit-helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'audit-bounds-'));
const path = join(dir, 'audit.db');
let chain: AuditChain;
let close: () => Promise<void> | undefined;
let raw: SqlDatabase;

beforeAll(async () => {
  const opened = await openChain({ backend: 'sqlite', path });
  chain = opened.value;
  close = () => opened.close?.();
  raw = await openSqlDatabase({ driver: 'sqlite', path });
});
afterAll(async () => {
  await raw?.close();
  await close?.();
  rmSync(dir, { recursive: true, force: true });
});

/** Bytes of the stored row (every text column), as written on disk. */
async function storedBytes(id: string): Promise<number> {
  const [row] = await raw.query<Record<string, string | number>>('SELECT * FROM audit_records WHERE seq = $1', [
    Number(id),
  ]);
  return Object.values(row as object).reduce((n: number, v) => n + Buffer.byteLength(String(v)), 0);
}

describe('audit records are bounded', () => {
  it('a 500 KiB tool name is written as 128 characters, with its length and sha256', async () => {
    const tool = 'x'.repeat(500 * 1024);
    const [record] = await chain.appendAll([
      { request_id: 'r1', action: 'flag', rule: 'flag-unregistered-tool', details: { method: 'tools/call', tool } },
    ]);
    expect(record!.details.tool).toBe(`${'x'.repeat(128)}…`);
    expect(record!.details.method).toBe('tools/call');
    expect(record!.details.cut).toEqual({ '$.details.tool': { length: tool.length, sha256: sha256Hex(tool) } });
    expect(await storedBytes(record!.id)).toBeLessThan(1024);
  });

  it('every kind of large value is cut: long strings, long arrays, many keys, long keys, deep nesting, the record fields', async () => {
    const deep: Record<string, unknown> = {};
    let node = deep;
    for (let i = 0; i < 50; i++) {
      node.next = {};
      node = node.next as Record<string, unknown>;
    }
    const [record] = await chain.appendAll([
      {
        request_id: 'r2',
        action: 'block',
        tenant: 't'.repeat(10_000),
        rule: 'r'.repeat(300),
        details: {
          message: 'm'.repeat(5000),
          violations: Array.from({ length: 5000 }, (_, i) => ({ path: `$.a${i}`, message: 'is not allowed' })),
          many: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i])),
          ['k'.repeat(1000)]: 'long key',
          deep,
        },
      },
    ]);
    const r = record!;
    expect(r.tenant).toHaveLength(257);
    expect(r.rule).toBe(`${'r'.repeat(256)}…`);
    expect(r.details.message).toHaveLength(1025);
    expect(r.details.violations).toHaveLength(64);
    expect(Object.keys(r.details.many as object)).toHaveLength(64);
    expect(Object.keys(r.details).some((k) => k.startsWith('kkkk') && k.length < 150)).toBe(true);
    expect(r.details.cut).toMatchObject({
      '$.tenant': { length: 10_000, sha256: sha256Hex('t'.repeat(10_000)) },
      '$.rule': { length: 300 },
      '$.details.message': { length: 5000, sha256: sha256Hex('m'.repeat(5000)) },
      '$.details.violations': { items: 5000 },
      '$.details.many': { keys: 1000 },
    });
    expect(Object.values(r.details.cut as object)).toContainEqual({ depth: true });
    expect(await storedBytes(r.id)).toBeLessThan(maxDetailsBytes + 4096);
  });

  it('details still too large after cutting keep their top-level scalars and the hash of the whole', async () => {
    // 64 fields of 64 strings of 1 KiB each: every value within its own bound, the whole far beyond.
    const details = Object.fromEntries(
      Array.from({ length: 64 }, (_, i) => [`f${i}`, Array.from({ length: 64 }, () => 'v'.repeat(1024))]),
    );
    const [record] = await chain.appendAll([
      { request_id: 'r3', action: 'flag', details: { ...details, method: 'tools/call', tool: 'echo' } },
    ]);
    const r = record!;
    expect(r.details).toMatchObject({ method: 'tools/call', tool: 'echo' });
    expect((r.details.cut as Record<string, { length: number }>)['$.details']?.length).toBeGreaterThan(4_000_000);
    expect(await storedBytes(r.id)).toBeLessThan(16 * 1024);
  });

  it('small records are written as they are (no cut), and the chain verifies', async () => {
    const details = { method: 'tools/call', tool: 'echo', session: 'abc', violations: 2, nested: { a: [1, 2, 3] } };
    const [record] = await chain.appendAll([{ request_id: 'r4', action: 'block', rule: 'schema-validation', details }]);
    expect(record!.details).toEqual(details);
    expect((await chain.verify()).chain_intact).toBe(true);
  });

  it('never cuts a surrogate pair in half', async () => {
    const tool = '😀'.repeat(100); // 200 UTF-16 code units
    const [record] = await chain.appendAll([{ request_id: 'r5', action: 'flag', details: { tool } }]);
    const kept = record!.details.tool as string;
    expect(kept.endsWith('…')).toBe(true);
    expect(kept.length).toBe(128 + 1); // 64 whole emoji, then the mark
    expect(kept).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/); // no lone high surrogate
  });
});
