/**
 * The `audit` stage on its own: each decision recorded exactly once, also when stages decide
 * while a stream passes (each on record before the client sees the event after it), a refusal
 * recorded and then rethrown unchanged, and an append failure surfacing as an internal failure of
 * the stage.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuditChain } from '../../plugins/audit-chain/api.ts';
import auditStage from '../../plugins/audit-chain/stage.ts';
import {
  Answer,
  answerOf,
  type GatewayContext,
  GatewayError,
  isGatewayError,
  type Stage,
  type StageInstance,
} from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { openChain } from '../fixtures/audit-helpers.ts';
import { serveStages } from '../helpers/stage-harness.ts';

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
  it('records every decision exactly once, those taken on a stream before the client sees the next event', async () => {
    const { chain, stage } = await setup();
    const seenByClient: number[] = [];
    // The terminal stage answers a stream, checked as it passes by a stage that decides on
    // events 1 and 3; what was on record when each event reached the audit stage is noted.
    const decideOnStream: Stage = async (ctx) => {
      ctx.state.caller = { id: 'acme', authenticated: true };
      ctx.state.decisions = [{ action: 'allow' }, { action: 'flag', rule: 'a' }];
      const events = ['data: 0\n\n', 'data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n'];
      const answer = new Answer(ctx, {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: Readable.from(events.map((e) => Buffer.from(e))),
      });
      ctx.state.answer = answer;
      answer.filterEvents({
        onEvent(event) {
          if (event.data === '1') ctx.state.decisions?.push({ action: 'redact', rule: 'b', phase: 'egress' });
          if (event.data === '3') {
            ctx.state.decisions?.push({ action: 'block', rule: 'c', phase: 'egress', policy: 'p', detail: 'leak' });
          }
          return { events: [event] };
        },
      });
    };
    const onRecord: Stage = async (ctx, next) => {
      await next();
      answerOf(ctx).filterEvents({
        onEvent: async (event) => {
          seenByClient.push((await chain.query()).records.length);
          return { events: [event] };
        },
      });
    };
    const server = await serveStages([onRecord, stage.handle, decideOnStream]);
    try {
      const res = await fetch(`${server.url}/`, { method: 'POST' });
      expect(await res.text()).toBe('data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n');
    } finally {
      server.close();
    }
    expect(seenByClient).toEqual([1, 2, 2, 3]);
    const { records } = await chain.query();
    expect(records.map((r) => [r.action, r.rule, r.phase, r.tenant])).toEqual([
      ['flag', 'a', '', 'acme'],
      ['redact', 'b', 'egress', 'acme'],
      ['block', 'c', 'egress', 'acme'],
    ]);
    expect(records[2]!.details).toEqual({ policy: 'p', message: 'leak' });
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
