/**
 * Audit-chain benchmark (`npx tsx bench/audit/run.ts`): appends per second on SQLite and
 * PostgreSQL — one appender awaiting each append, one process with many appends in flight (group
 * commit), several processes appending to the same chain — and the time to verify a chain of
 * BENCH_AUDIT_RECORDS records (default 1 000 000). Every chain is verified after it is measured.
 *
 *   BENCH_AUDIT_SECONDS=3 BENCH_AUDIT_PROCS=4 BENCH_AUDIT_CONCURRENCY=32 BENCH_AUDIT_RECORDS=1000000
 *   BENCH_AUDIT_PG_URL=postgres://postgres@127.0.0.1:5432/test   (empty: skip PostgreSQL)
 *   BENCH_AUDIT_ONLY=append|verify   (one half only)
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { AuditChain } from '../../plugins/audit-chain/api.ts';
import auditChain, { type AuditChainOptions } from '../../plugins/audit-chain/resource.ts';
import { openSqlDatabase } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

const num = (name: string, def: number) => {
  const n = Number(process.env[name] ?? def);
  return Number.isFinite(n) && n > 0 ? n : def;
};
const seconds = num('BENCH_AUDIT_SECONDS', 3);
const procs = num('BENCH_AUDIT_PROCS', 4);
const concurrency = num('BENCH_AUDIT_CONCURRENCY', 32);
const verifyRecords = num('BENCH_AUDIT_RECORDS', 1_000_000);
const pgUrl = process.env.BENCH_AUDIT_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dir = mkdtempSync(join(tmpdir(), 'sy-bench-audit-'));
const pgTables: string[] = [];

interface Row {
  backend: string;
  case: string;
  value: string;
}
const rows: Row[] = [];
const report = (backend: string, label: string, value: string) => {
  rows.push({ backend, case: label, value });
  console.log(`${backend.padEnd(22)} ${label.padEnd(44)} ${value}`);
};

function backends(): Array<{ name: string; options: () => AuditChainOptions }> {
  const list: Array<{ name: string; options: () => AuditChainOptions }> = [
    { name: 'sqlite (FULL)', options: () => ({ path: join(dir, `${randomUUID()}.db`), synchronous: 'FULL' }) },
    { name: 'sqlite (NORMAL)', options: () => ({ path: join(dir, `${randomUUID()}.db`), synchronous: 'NORMAL' }) },
  ];
  if (pgUrl) {
    list.push({
      name: 'postgres',
      options: () => {
        const table = `audit_bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
        pgTables.push(table);
        return { backend: 'postgres', url: pgUrl, table, pool_size: 10 };
      },
    });
  }
  return list;
}

async function open(options: AuditChainOptions) {
  return auditChain.create(options, createTestEnv());
}

/** Appends for `seconds` with `inFlight` appends outstanding; returns appends per second. */
async function inProcess(chain: AuditChain, inFlight: number): Promise<number> {
  let n = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      await chain.append({ request_id: `r${n}`, action: 'block', rule: 'bench', tenant: 't', regulation: 'GDPR' });
      n++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return n / ((performance.now() - started) / 1000);
}

/** `count` processes appending one at a time to the same chain; returns appends per second, all together. */
async function processes(options: AuditChainOptions, count: number): Promise<{ rate: number; errors: number }> {
  const script = join(import.meta.dirname, 'appender.ts');
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', 'tsx', script], {
      env: { ...process.env, AUDIT_OPTIONS: JSON.stringify(options), AUDIT_MS: String(seconds * 1000) },
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  const outputs = children.map((c) => {
    let out = '';
    c.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    return {
      ready: new Promise<void>((resolve) => c.stdout.on('data', () => out.includes('ready') && resolve())),
      done: new Promise<string>((resolve) => c.once('exit', () => resolve(out))),
    };
  });
  await Promise.all(outputs.map((o) => o.ready));
  const started = performance.now();
  for (const c of children) c.stdin.end('go\n');
  const texts = await Promise.all(outputs.map((o) => o.done));
  const elapsed = (performance.now() - started) / 1000;
  let appended = 0;
  let errors = 0;
  for (const t of texts) {
    const m = /appended (\d+) errors (\d+)/.exec(t);
    appended += Number(m?.[1] ?? 0);
    errors += Number(m?.[2] ?? 0);
  }
  return { rate: appended / Math.min(elapsed, seconds), errors };
}

async function verifyOrDie(chain: AuditChain, what: string): Promise<void> {
  const result = await chain.verify();
  if (result.status !== 'valid') throw new Error(`${what}: chain does not verify: ${JSON.stringify(result)}`);
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function appendRates(): Promise<void> {
  for (const b of backends()) {
    const seqOptions = b.options();
    const seq = await open(seqOptions);
    report(b.name, 'sequential (1 in flight), appends/s', fmt(await inProcess(seq.value, 1)));
    report(b.name, `1 process, ${concurrency} in flight, appends/s`, fmt(await inProcess(seq.value, concurrency)));
    await verifyOrDie(seq.value, b.name);
    await seq.close?.();

    const multiOptions = b.options();
    const multi = await open(multiOptions); // creates the table before the children race for it
    const { rate, errors } = await processes(multiOptions, procs);
    report(
      b.name,
      `${procs} processes, 1 in flight each, appends/s`,
      `${fmt(rate)}${errors ? ` (${errors} failed)` : ''}`,
    );
    await verifyOrDie(multi.value, `${b.name} processes`);
    await multi.close?.();
  }
}

async function verifyTime(name: string, options: AuditChainOptions): Promise<void> {
  const instance = await open(options);
  const chain = instance.value;
  const fillStarted = performance.now();
  const batch = 1000;
  for (let i = 0; i < verifyRecords; i += batch) {
    const size = Math.min(batch, verifyRecords - i);
    await chain.appendAll(
      Array.from({ length: size }, (_, j) => ({
        request_id: `req-${i + j}`,
        tenant: `tenant-${(i + j) % 50}`,
        action: (i + j) % 3 ? 'block' : 'redact',
        rule: 'pii.email',
        regulation: 'GDPR',
        phase: 'ingress',
        details: { score: 0.93, spans: 2 },
      })),
    );
  }
  const fill = (performance.now() - fillStarted) / 1000;
  report(name, `fill ${fmt(verifyRecords)} records (batches of ${batch})`, `${fill.toFixed(1)} s`);
  const started = performance.now();
  const result = await chain.verify();
  const took = (performance.now() - started) / 1000;
  if (result.status !== 'valid' || result.records_verified !== verifyRecords) {
    throw new Error(`${name}: verify gave ${JSON.stringify(result)}`);
  }
  report(name, `verify ${fmt(verifyRecords)} records`, `${took.toFixed(2)} s (${fmt(verifyRecords / took)} records/s)`);
  await instance.close?.();
}

try {
  console.log(`audit-chain benchmark: ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), node ${process.version}`);
  console.log(`${seconds} s per append case; records verified: ${fmt(verifyRecords)}\n`);
  const only = process.env.BENCH_AUDIT_ONLY;
  if (only !== 'verify') await appendRates();
  if (only !== 'append') {
    await verifyTime('sqlite (FULL)', { path: join(dir, 'verify.db') });
    if (pgUrl) await verifyTime('postgres', backends()[2]!.options());
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
  if (pgUrl && pgTables.length > 0) {
    const db = await openSqlDatabase({ driver: 'postgres', url: pgUrl });
    for (const t of pgTables) await db.exec(`DROP TABLE IF EXISTS ${t}`);
    await db.close();
  }
}
