/**
 * One appending process of the audit benchmark: opens the audit-chain resource from
 * AUDIT_OPTIONS (JSON), prints `ready`, waits for a line on stdin, then appends for AUDIT_MS
 * milliseconds with AUDIT_CONCURRENCY appends in flight and prints `appended <n> errors <m>`.
 */
import { once } from 'node:events';
import auditChain, { type AuditChainOptions } from '../../plugins/audit-chain/resource.ts';
import { createTestEnv } from '../../runtime/testing.ts';

const options = JSON.parse(process.env.AUDIT_OPTIONS ?? '{}') as AuditChainOptions;
const ms = Number(process.env.AUDIT_MS ?? 3000);
const concurrency = Number(process.env.AUDIT_CONCURRENCY ?? 1);

const instance = await auditChain.create(options, createTestEnv());
const chain = instance.value;
process.stdout.write('ready\n');
await once(process.stdin, 'data');
process.stdin.destroy();

let appended = 0;
let errors = 0;
const until = Date.now() + ms;
async function worker(): Promise<void> {
  while (Date.now() < until) {
    try {
      await chain.append({
        request_id: `bench-${process.pid}-${appended}`,
        action: 'block',
        rule: 'bench',
        tenant: 't',
      });
      appended++;
    } catch {
      errors++;
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
await instance.close?.();
process.stdout.write(`appended ${appended} errors ${errors}\n`);
