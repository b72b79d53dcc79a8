/**
 * Plugin options have one source of truth, their JSON Schema: `create` always receives them with
 * the schema's defaults applied (also when a test calls it directly, as the stage harness does),
 * and their type is inferred from the schema (option-fallbacks.test.ts: no plugin repeats a default).
 */
import { describe, expect, it } from 'vitest';
import auth from '../../plugins/auth/index.ts';
import { definePlugin, defineResource, type FromSchema, type JsonSchema } from '../../runtime/index.ts';
import type { StageInstance } from '../../runtime/plugin.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const schema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1 },
    size: { type: 'integer', minimum: 1, default: 10 },
    mode: { enum: ['fast', 'exact'], default: 'fast' },
    note: { type: 'string' },
    failure: {
      type: 'object',
      default: {},
      properties: { status: { type: 'integer', default: 502 }, message: { type: 'string', default: 'failed' } },
    },
    items: {
      type: 'array',
      default: [],
      items: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, weight: { default: 1 } } },
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof schema>;

describe('options defaults', () => {
  function recorder() {
    const seen: Options[] = [];
    const plugin = definePlugin<Options>({
      name: 'recorder',
      description: 'records its options',
      options: schema,
      create(options) {
        seen.push(options);
        return async (_ctx, next) => next();
      },
    });
    return { plugin, seen };
  }

  it('create receives the schema defaults at every depth when called directly', async () => {
    const { plugin, seen } = recorder();
    const given = { name: 'a', items: [{ id: 'x' }] } as unknown as Options;
    await plugin.create(given, createTestEnv());
    expect(seen[0]).toEqual({
      name: 'a',
      size: 10,
      mode: 'fast',
      failure: { status: 502, message: 'failed' },
      items: [{ id: 'x', weight: 1 }],
    });
    // The caller's object is left as it was written.
    expect(given).toEqual({ name: 'a', items: [{ id: 'x' }] });
  });

  it('values given win over defaults', async () => {
    const { plugin, seen } = recorder();
    await plugin.create({ name: 'a', size: 3, mode: 'exact', failure: { status: 503 } } as Options, createTestEnv());
    expect(seen[0]).toMatchObject({ size: 3, mode: 'exact', failure: { status: 503, message: 'failed' } });
  });

  it('create refuses options its schema refuses, naming each problem, before the plugin runs', async () => {
    const { plugin, seen } = recorder();
    await expect(
      async () => await plugin.create({ size: 0, mode: 'slow' } as unknown as Options, createTestEnv()),
    ).rejects.toThrow(
      /plugin "recorder": invalid options: .*name.*\/size must be >= 1.*\/mode must be equal to one of/,
    );
    expect(seen).toEqual([]);
  });

  it("a resource's create receives its defaults too", async () => {
    const resource = defineResource<Options, Options>({
      type: 'recorder',
      description: 'records its options',
      options: schema,
      create: (options) => ({ value: options }),
    });
    const instance = await resource.create({ name: 'r' } as Options, createTestEnv());
    expect(instance.value).toMatchObject({ size: 10, mode: 'fast', failure: { status: 502 }, items: [] });
  });

  it('a real plugin behind the stage harness works from its defaults alone', async () => {
    // auth's token_header (Authorization, as a Bearer token) and enabled come from its schema only.
    const stage = (await auth.create({ tokens: ['s3cret'] } as never, createTestEnv())) as StageInstance;
    const server = await serveStages([
      stage.handle,
      async (ctx) => {
        ctx.body = { caller: ctx.state.caller };
      },
    ]);
    try {
      const missing = await fetch(`${server.url}/x`);
      expect(missing.status).toBe(401);
      expect(await missing.json()).toMatchObject({ message: 'Missing token in header Authorization' });
      const ok = await fetch(`${server.url}/x`, { headers: { authorization: 'Bearer s3cret' } });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toMatchObject({ caller: { id: 'token-1', authenticated: true } });
    } finally {
      server.close();
    }
  });
});

describe('options types', () => {
  it('are inferred from the schema: defaulted and required keys present, enums as unions', () => {
    const full: Options = { name: 'a', size: 1, mode: 'exact', failure: { status: 500, message: 'm' }, items: [] };
    // @ts-expect-error `size` has a default, so it is always present
    const noSize: Options = { name: 'a', mode: 'exact', failure: { status: 500, message: 'm' }, items: [] };
    // @ts-expect-error `mode` is one of the enum's values
    const badMode: Options = { ...full, mode: 'slow' };
    // @ts-expect-error `size` is a number
    const badSize: Options = { ...full, size: '1' };
    const withNote: Options = { ...full, note: 'optional, no default' };
    expect([noSize, badMode, badSize, withNote]).toHaveLength(4);
  });
});
