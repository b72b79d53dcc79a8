/**
 * The `audit` stage on its own: each decision recorded exactly once however often and however
 * concurrently `auditFlush` is called, `deny` written as `block`, a refusal recorded and then
 * rethrown unchanged, and an append failure surfacing as an internal failure of the stage.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuditChain } from '../../plugins/audit-chain/api.ts';
import auditStage from '../../plugins/audit-chain/stage.ts';
import { type GatewayContext, GatewayError, isGatewayError, type StageInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { openChain } from '../fixtures/audit-helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'sy-audit-stage-'));
const closers: Array<() => Promise<void> | undefined> = [];
afterAll(async () => {
  for (const c of closers.splice(0)) await c();
});

async function setup(record: 'non-allow' | 'all' = 'non-allow') {
  const instance = await openChain({ path: join(dir, `${randomUUID()}.db`), record });
  closers.push(() => instance.close?.());
  const stage = (await auditStage.create(
    { chain: 'audit' },
    createTestEnv({ resources: { audit: instance.value } }),
  )) as StageInstance;
  return { chain: instance.value as AuditChain, stage, close: () => instance.close?.() };
}

const context = (tenant?: string) =>
  ({
    state: {
      requestId: randomUUID(),
      service: 't',
      route: 'r',
      annotations: {},
      caller: tenant && { id: tenant, authenticated: true },
    },
  }) as unknown as GatewayContext;

describe('audit stage', () => {
  it('records every decision exactly once, under concurrent flushes', async () => {
    const { chain, stage } = await setup();
    const ctx = context('acme');
    await stage.handle(ctx, async () => {
      ctx.state.decisions = [{ action: 'allow' }, { action: 'flag', rule: 'a' }];
      await Promise.all([ctx.state.auditFlush!(), ctx.state.auditFlush!()]);
      ctx.state.decisions.push({ action: 'block', rule: 'b', phase: 'egress', policy: 'p', detail: 'leak' });
      await Promise.all([ctx.state.auditFlush!(), ctx.state.auditFlush!(), ctx.state.auditFlush!()]);
    });
    const { records } = await chain.query();
    expect(records.map((r) => [r.action, r.rule, r.phase, r.tenant, r.request_id])).toEqual([
      ['flag', 'a', '', 'acme', ctx.state.requestId],
      ['block', 'b', 'egress', 'acme', ctx.state.requestId],
    ]);
    expect(records[1]!.details).toEqual({ policy: 'p', message: 'leak' });
  });

  it('records a refusal, then rethrows it unchanged', async () => {
    const { chain, stage } = await setup();
    const ctx = context();
    const refusal = new GatewayError('policy_violation', 'blocked');
    const thrown = await stage
      .handle(ctx, async () => {
        ctx.state.decisions = [{ action: 'block', rule: 'r' }];
        throw refusal;
      })
      .catch((e: unknown) => e);
    expect(thrown).toBe(refusal);
    expect((await chain.query()).records.map((r) => r.action)).toEqual(['block']);
  });

  it('record: all writes one allow for a request without decisions', async () => {
    const { chain, stage } = await setup('all');
    await stage.handle(context('t'), async () => {});
    expect((await chain.query()).records.map((r) => [r.action, r.tenant])).toEqual([['allow', 't']]);
  });

  it('fails as an internal error (so on_error applies) when the record cannot be written', async () => {
    const { stage, close } = await setup();
    await close();
    const ctx = context();
    const err = await stage
      .handle(ctx, async () => {
        ctx.state.decisions = [{ action: 'redact', rule: 'pii' }];
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(isGatewayError(err)).toBe(false);
    expect((err as Error).message).toBe('audit record could not be written');
  });
});
