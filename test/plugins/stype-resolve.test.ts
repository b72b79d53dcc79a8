/**
 * stype-resolve on the shipped registry: the SType of a JSON-RPC message from its method and
 * tool name, a route's fixed SType, a per-request override, and unresolved messages.
 */
import { resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { RequestedTyping, STypeRegistry } from '../../plugins/stype-registry/api.ts';
import registryPlugin from '../../plugins/stype-registry/index.ts';
import resolvePlugin from '../../plugins/stype-resolve/index.ts';
import { type GatewayContext, GatewayError, type JsonRpcRequest, type StageInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { requestState } from '../helpers/stage-harness.ts';

let registry: STypeRegistry;
const env = () => createTestEnv({ resources: { registry } });

beforeAll(async () => {
  const dir = resolve(import.meta.dirname, '../../configs/registry');
  registry = (await registryPlugin.create({ dir, namespace: 'everything' }, createTestEnv())).value;
});

async function stage(options: { registry: string; stype?: string } = { registry: 'registry' }) {
  const made = await resolvePlugin.create(options, env());
  return (typeof made === 'function' ? { handle: made } : made) as StageInstance;
}

/** Runs the stage on a request state; returns the state and whether the pipeline went on. */
async function run(s: StageInstance, rpc?: JsonRpcRequest, requested?: RequestedTyping) {
  const state = requestState({ rpc, requested });
  let nextCalled = false;
  await s.handle({ state } as GatewayContext, async () => {
    nextCalled = true;
  });
  return { state, nextCalled };
}

const call = (name: string, args: Record<string, unknown> = {}): JsonRpcRequest => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name, arguments: args },
});

describe('stype-resolve', () => {
  it('resolves tools/call by tool name to <namespace>.<tool>', async () => {
    const { state, nextCalled } = await run(await stage(), call('echo', { message: 'hi' }));
    const echo = registry.get('everything.echo')!;
    expect(state.stype).toEqual({ id: 'everything.echo', version: echo.version, status: 'approved' });
    expect(state.annotations.stype_source).toBe('registry');
    expect(state.annotations.stype_unresolved).toBeUndefined();
    expect(nextCalled).toBe(true);
  });

  it('carries the status of a pending SType', async () => {
    const { state } = await run(await stage(), call('get-env'));
    expect(state.stype).toMatchObject({ id: 'everything.get-env', status: 'pending' });
  });

  it('resolves other methods by method', async () => {
    const s = await stage();
    const read = await run(s, {
      jsonrpc: '2.0',
      id: 2,
      method: 'resources/read',
      params: { uri: 'demo://resource/dynamic/text/1' },
    });
    expect(read.state.stype?.id).toBe('everything.resources.read');
    const list = await run(s, { jsonrpc: '2.0', id: 3, method: 'tools/list' });
    expect(list.state.stype?.id).toBe('mcp.tools.list');
  });

  it('leaves an unknown tool or method untyped, marks it unresolved, and goes on', async () => {
    const s = await stage();
    for (const rpc of [call('no-such-tool'), { jsonrpc: '2.0', id: 4, method: 'ping' } as JsonRpcRequest]) {
      const { state, nextCalled } = await run(s, rpc);
      expect(state.stype).toBeUndefined();
      expect(state.annotations.stype_unresolved).toBe(true);
      expect(nextCalled).toBe(true);
    }
  });

  it('does nothing without a parsed JSON-RPC message', async () => {
    const { state, nextCalled } = await run(await stage(), undefined);
    expect(state.stype).toBeUndefined();
    expect(state.annotations).toEqual({});
    expect(nextCalled).toBe(true);
  });

  it("uses the route's fixed SType for every message", async () => {
    const s = await stage({ registry: 'registry', stype: 'everything.get-sum' });
    const { state } = await run(s, call('echo'));
    expect(state.stype?.id).toBe('everything.get-sum');
    expect(state.annotations.stype_source).toBe('route');
  });

  it('refuses at load a fixed SType the registry does not have', async () => {
    await expect(stage({ registry: 'registry', stype: 'everything.nope' })).rejects.toThrow(
      /everything\.nope.*not in the registry/,
    );
  });

  it('lets a per-request override win over the route and the registry', async () => {
    const s = await stage({ registry: 'registry', stype: 'everything.get-sum' });
    const { state } = await run(s, call('echo'), { stype: 'everything.get-annotated-message' });
    expect(state.stype?.id).toBe('everything.get-annotated-message');
    expect(state.annotations.stype_source).toBe('override');
  });

  it('answers 404 stype_not_found for an override naming an unknown SType', async () => {
    const err = await run(await stage(), call('echo'), { stype: 'everything.nope' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ kind: 'not_found', code: 'stype_not_found', details: { stype: 'everything.nope' } });
    expect((err as GatewayError).extra?.available_stypes).toContain('everything.echo');
  });

  it('declares its options schema with the registry required', () => {
    expect(resolvePlugin.name).toBe('stype-resolve');
    expect(resolvePlugin.options).toMatchObject({ required: ['registry'], additionalProperties: false });
  });
});
