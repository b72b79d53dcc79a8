/**
 * The audit chain with real gateway processes (child processes running
 * test/fixtures/audit-appender.ts): several processes appending at once to one SQLite file or one
 * PostgreSQL table make one linear chain, and a process killed with SIGKILL in the middle of its
 * appends leaves a chain that verifies, with every record it acknowledged stored.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuditChainOptions } from '../../plugins/audit-chain/resource.ts';
import { dropPgTables, openChain, PG_URL, skipPg, uniqueTable } from '../fixtures/audit-helpers.ts';

if (skipPg) console.warn('audit process tests on PostgreSQL skipped: nothing at 127.0.0.1:5432');

const appender = join(import.meta.dirname, '../fixtures/audit-appender.ts');
const dir = mkdtempSync(join(tmpdir(), 'sy-audit-proc-'));
const pgTables: string[] = [];
const children = new Set<ChildProcess>();
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await dropPgTables(pgTables);
});

interface Appender {
  child: ChildProcess;
  /** request_id → id of every acknowledged record, as printed so far. */
  acked: Map<string, string>;
  /** Resolves once the process has opened the chain (with AUDIT_WAIT_GO=1). */
  ready: Promise<void>;
  /** Resolves once `n` records are acknowledged. */
  ackedAtLeast(n: number): Promise<void>;
  exited: Promise<number | null>;
}

function startAppender(options: AuditChainOptions, env: Record<string, string>): Appender {
  const child = spawn(process.execPath, ['--import', 'tsx', appender], {
    env: { ...process.env, AUDIT_OPTIONS: JSON.stringify(options), ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  const acked = new Map<string, string>();
  let isReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    isReady = resolve;
  });
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let partial = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const [word, id, requestId] = line.split(' ');
      if (word === 'ack' && id && requestId) acked.set(requestId, id);
      if (word === 'ready') isReady();
    }
    for (const w of waiters.filter((w) => acked.size >= w.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      if (code !== 0 && code !== null) console.error(stderr);
      resolve(code);
    }),
  );
  return {
    child,
    acked,
    ready,
    exited,
    ackedAtLeast: (n) =>
      acked.size >= n
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            waiters.push({ n, resolve });
            void exited.then(() => reject(new Error(`appender exited after ${acked.size} acks: ${stderr}`)));
          }),
  };
}

const backends: Array<{ name: string; skip: boolean; options(): AuditChainOptions }> = [
  { name: 'sqlite', skip: false, options: () => ({ path: join(dir, `${uniqueTable('proc')}.db`) }) },
  {
    name: 'postgres',
    skip: skipPg,
    options: () => {
      const table = uniqueTable();
      pgTables.push(table);
      return { backend: 'postgres', url: PG_URL, table };
    },
  },
];

describe.each(backends)('audit chain with several processes on $name', (b) => {
  it.skipIf(b.skip)('keeps one linear chain when three processes append at once', async () => {
    const options = b.options();
    const procs = ['p1', 'p2', 'p3'].map((tag) =>
      startAppender(options, {
        AUDIT_COUNT: '100',
        AUDIT_CONCURRENCY: '4',
        AUDIT_TAG: tag,
        AUDIT_WAIT_GO: '1',
        // 20 ms between a worker's appends: each process takes at least 0.5 s, so the three
        // overlap even when a busy machine wakes them a few hundred ms apart (at 2 ms, a run at
        // load 10-14 saw three blocks one after another, issue 32).
        AUDIT_PAUSE_MS: '20',
      }),
    );
    await Promise.all(procs.map((p) => p.ready));
    for (const p of procs) p.child.stdin!.end('go\n');
    expect(await Promise.all(procs.map((p) => p.exited))).toEqual([0, 0, 0]);

    const { value: chain, close } = await openChain(options);
    try {
      const { records, total } = await chain.query({ limit: 1000 });
      expect(total).toBe(300);
      expect(records.map((r) => r.id)).toEqual(Array.from({ length: 300 }, (_, i) => String(i + 1)));
      for (let i = 1; i < records.length; i++) expect(records[i]!.prev_hash).toBe(records[i - 1]!.hash);
      const stored = new Map(records.map((r) => [r.request_id, r.id]));
      for (const p of procs) for (const [requestId, id] of p.acked) expect(stored.get(requestId)).toBe(id);
      // The processes really interleaved: one process's records are not one block.
      const owners = records.map((r) => r.tenant);
      expect(owners.filter((t, i) => i > 0 && t !== owners[i - 1]).length).toBeGreaterThan(2);
      expect(await chain.verify()).toMatchObject({ status: 'valid', records_verified: 300, chain_intact: true });
    } finally {
      await close?.();
    }
  });

  it.skipIf(b.skip)(
    'survives SIGKILL during appends: the chain verifies, every acknowledged record is there',
    async () => {
      const options = b.options();
      const proc = startAppender(options, { AUDIT_COUNT: '0', AUDIT_CONCURRENCY: '8', AUDIT_TAG: 'killed' });
      await proc.ackedAtLeast(300);
      proc.child.kill('SIGKILL');
      expect(await proc.exited).toBeNull();
      const acked = new Map(proc.acked);

      const { value: chain, close } = await openChain(options);
      try {
        const result = await chain.verify();
        expect(result).toMatchObject({ status: 'valid', chain_intact: true });
        const { records, total } = await chain.query({ limit: 1000, offset: 0 });
        expect(result.records_verified).toBe(total);
        const all =
          total > 1000 ? [...records, ...(await chain.query({ limit: 1000, offset: 1000 })).records] : records;
        const stored = new Map(all.map((r) => [r.request_id, r.id]));
        for (const [requestId, id] of acked) expect(stored.get(requestId), requestId).toBe(id);
        // And the chain goes on from where the killed process left it.
        const next = await chain.append({ request_id: 'after-kill', action: 'flag' });
        expect(next.id).toBe(String(total + 1));
        expect((await chain.verify()).status).toBe('valid');
      } finally {
        await close?.();
      }
    },
  );
});
