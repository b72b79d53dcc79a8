/**
 * policy: the rule format and its load-time checks (a broken file names file, policy and rule),
 * evaluation semantics (allow exceptions, deny wins, flags, caller attributes, `matches`),
 * modes, reload, and the stage in real services: the shipped registry denies get-env with the
 * seed's 403 body, and tools/list is filtered per caller.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyPlugin } from '../../plugins/policy/index.ts';
import {
  Answer,
  answerOf,
  type Caller,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type Mode,
  type StageInstance,
} from '../../runtime/index.ts';
import { createTestEnv, type StartedService, startService } from '../../runtime/testing.ts';
import { everythingStdioYaml } from '../helpers/servers.ts';
import { postRpc, shippedRegistryYaml, writeServiceFile } from '../helpers/services.ts';
import { requestState } from '../helpers/stage-harness.ts';

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'policy-test-'));
}

function writePolicy(dir: string, file: string, doc: unknown): string {
  const path = join(dir, file);
  writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return path;
}

const tools = {
  name: 'tools',
  description: 'tool rules',
  rules: [
    {
      id: 'allow-admin-everything',
      when: { '==': [{ var: 'caller.attributes.role' }, 'admin'] },
      action: 'allow',
      detail: 'admins may call anything',
    },
    {
      id: 'deny-admin-tools',
      when: { matches: [{ var: 'tool' }, '^admin-'] },
      action: 'deny',
      detail: 'admin tools are for admins',
    },
    {
      id: 'flag-long-message',
      when: { '>': [{ var: 'arguments.message.length' }, 20] },
      action: 'flag',
      detail: 'long message',
    },
  ],
};
const secrets = {
  name: 'secrets',
  rules: [
    {
      id: 'no-secrets',
      when: { matches: [{ var: 'arguments.message' }, 'password\\s*=', 'i'] },
      action: 'deny',
      detail: 'no credentials in messages',
    },
  ],
};

async function create(options: Record<string, unknown>, configDir: string) {
  const env = createTestEnv({ configDir });
  const inst = (await policyPlugin.create(
    { phase: 'ingress', filter_list: true, ...options } as never,
    env,
  )) as StageInstance;
  return { inst, env };
}

function context(
  method: string,
  params: Record<string, unknown> | undefined,
  options: { mode?: Mode; caller?: Caller } = {},
): GatewayContext {
  const rpc: JsonRpcRequest = { jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) };
  return {
    method: 'POST',
    path: '/',
    // What the answer store reads of the response before a stage sets a status (Koa's default).
    res: { statusCode: 404 },
    state: requestState({ mode: options.mode ?? 'strict', rpc, caller: options.caller }),
  } as unknown as GatewayContext;
}

const callOf = (tool: string, args: Record<string, unknown> = {}, options: { mode?: Mode; caller?: Caller } = {}) =>
  context('tools/call', { name: tool, arguments: args }, options);

async function run(inst: StageInstance, ctx: GatewayContext) {
  let forwarded = false;
  const error = await inst
    .handle(ctx, async () => {
      forwarded = true;
    })
    .catch((e: unknown) => e);
  return { forwarded, error: error as GatewayError | undefined, state: ctx.state };
}

describe('policy files: load-time checks', () => {
  const broken = async (doc: unknown) => {
    const dir = tempDir();
    const file = writePolicy(dir, 'p.yaml', doc);
    return { file, error: await create({ files: ['p.yaml'] }, dir).catch((e: Error) => e) };
  };

  it('a rule with a bad action names the file, the policy and the rule id', async () => {
    const { file, error } = await broken({ name: 'p1', rules: [{ id: 'r1', when: true, action: 'explode' }] });
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe(
      `${file}: policy "p1" rule "r1": action must be one of deny, block, stop, allow, flag, redact`,
    );
  });

  it('an unknown json-logic operator, an invalid regex, a missing `when`, a typo field', async () => {
    const op = await broken({ name: 'p', rules: [{ id: 'r', when: { and: [{ frobnicate: [1] }] }, action: 'deny' }] });
    expect((op.error as Error).message).toContain(
      'policy "p" rule "r": when.and[0]: unknown json-logic operator "frobnicate"',
    );
    const re = await broken({
      name: 'p',
      rules: [{ id: 'r', when: { matches: [{ var: 'tool' }, '(['] }, action: 'deny' }],
    });
    expect((re.error as Error).message).toContain('rule "r": when.matches: Invalid regular expression');
    const missing = await broken({ name: 'p', rules: [{ id: 'r', action: 'deny' }] });
    expect((missing.error as Error).message).toContain('rule "r": is missing "when"');
    const typo = await broken({ name: 'p', rules: [{ id: 'r', when: true, action: 'deny', details: 'x' }] });
    expect((typo.error as Error).message).toContain('rule "r": has unknown field "details"');
    const log = await broken({ name: 'p', rules: [{ id: 'r', when: { log: 1 }, action: 'deny' }] });
    expect((log.error as Error).message).toContain('unknown json-logic operator "log"');
  });

  it('YAML syntax errors carry line and column; duplicate names and unknown selected policies fail', async () => {
    const { error } = await broken('name: p\nrules: [\n  - id: x\n');
    expect((error as Error).message).toMatch(/p\.yaml:\d+:\d+: /);
    const dir = tempDir();
    writePolicy(dir, 'a.yaml', tools);
    writePolicy(dir, 'b.yaml', [tools]);
    await expect(create({ files: ['a.yaml', 'b.yaml'] }, dir)).rejects.toThrow(/policy "tools" is defined twice/);
    await expect(create({ files: ['a.yaml'], policies: ['nope'] }, dir)).rejects.toThrow(/policy "nope" is not loaded/);
  });
});

describe('policy evaluation', () => {
  let dir: string;
  beforeAll(() => {
    dir = tempDir();
    writePolicy(dir, 'all.yaml', { policies: [tools, secrets] });
  });

  it('strict: a deny throws policy_violation with {policy, detail} and sets the decision', async () => {
    const { inst } = await create({ files: ['all.yaml'] }, dir);
    const r = await run(inst, callOf('admin-reset'));
    expect(r.forwarded).toBe(false);
    expect(r.error).toBeInstanceOf(GatewayError);
    expect(r.error?.kind).toBe('policy_violation');
    expect(r.error?.details).toEqual({ policy: 'tools', detail: 'admin tools are for admins' });
    expect(r.state.decision).toMatchObject({
      phase: 'ingress',
      action: 'block',
      policy: 'tools',
      rule: 'deny-admin-tools',
      detail: 'admin tools are for admins',
    });
  });

  it('an allow rule is an exception within its policy, but a deny of another policy still wins', async () => {
    const { inst } = await create({ files: ['all.yaml'] }, dir);
    const admin: Caller = { id: 'alice', authenticated: true, attributes: { role: 'admin' } };
    const ok = await run(inst, callOf('admin-reset', {}, { caller: admin }));
    expect(ok.forwarded).toBe(true);
    expect(ok.state.decision).toMatchObject({ action: 'allow', policy: 'tools', rule: 'allow-admin-everything' });
    const denied = await run(inst, callOf('echo', { message: 'password = hunter2' }, { caller: admin }));
    expect(denied.error?.details).toEqual({ policy: 'secrets', detail: 'no credentials in messages' });
  });

  it('flag rules annotate without blocking; no match means allow', async () => {
    const { inst } = await create({ files: ['all.yaml'] }, dir);
    const flagged = await run(inst, callOf('echo', { message: 'a message longer than twenty characters' }));
    expect(flagged.forwarded).toBe(true);
    expect(flagged.state.decision).toMatchObject({ action: 'flag', rule: 'flag-long-message' });
    expect(flagged.state.annotations.policy_flags).toEqual([
      { policy: 'tools', rule: 'flag-long-message', detail: 'long message' },
    ]);
    const plain = await run(inst, callOf('echo', { message: 'hi' }));
    expect(plain.state.decision).toEqual({ action: 'allow', phase: 'ingress' });
  });

  it('permissive: a deny is forwarded, annotated and counted; audit only counts', async () => {
    const { inst, env } = await create({ files: ['all.yaml'] }, dir);
    const p = await run(inst, callOf('admin-reset', {}, { mode: 'permissive' }));
    expect(p.forwarded).toBe(true);
    expect(p.state.decision?.action).toBe('block');
    expect(p.state.annotations.policy_violation).toEqual({
      policy: 'tools',
      rule: 'deny-admin-tools',
      detail: 'admin tools are for admins',
    });
    const a = await run(inst, callOf('admin-reset', {}, { mode: 'audit' }));
    expect(a.forwarded).toBe(true);
    expect(a.state.annotations.policy_violation).toBeUndefined();
    const text = await env.metrics.registry.getSingleMetricAsString('switchyard_policy_decisions_total');
    expect(text).toContain(
      'switchyard_policy_decisions_total{policy="tools",rule="deny-admin-tools",action="block"} 2',
    );
  });

  it('the stage mode option overrides the route mode; `policies` selects what applies', async () => {
    const { inst } = await create({ files: ['all.yaml'], mode: 'permissive' }, dir);
    expect((await run(inst, callOf('admin-reset'))).forwarded).toBe(true);
    const only = (await create({ files: ['all.yaml'], policies: ['secrets'] }, dir)).inst;
    expect((await run(only, callOf('admin-reset'))).forwarded).toBe(true);
    expect((await run(only, callOf('echo', { message: 'password=x' }))).error?.kind).toBe('policy_violation');
  });

  it('rules of another phase do not run; a phase that does not exist is refused at load', async () => {
    const d = tempDir();
    // (`egress` is the phase of answers, checked through a classifier set: see the safety filter.)
    writePolicy(d, 'p.yaml', { name: 'late', rules: [{ id: 'r', phase: 'egress', when: true, action: 'deny' }] });
    const { inst } = await create({ files: ['p.yaml'] }, d);
    expect((await run(inst, callOf('echo'))).forwarded).toBe(true);
    // A misspelt phase used to make a rule that never ran.
    writePolicy(d, 'q.yaml', { name: 'typo', rules: [{ id: 'r', phase: 'egres', when: true, action: 'deny' }] });
    await expect(create({ files: ['q.yaml'] }, d)).rejects.toThrow(
      /policy "typo" rule "r": phase must be one of ingress, egress/,
    );
  });

  /** Runs the stage on a tools/list request answered with `listing`; the answer as written. */
  async function listThrough(inst: StageInstance, ctx: GatewayContext, listing: unknown) {
    await inst.handle(ctx, async () => {
      ctx.state.answer = Answer.fromJson(ctx, structuredClone(listing));
    });
    return (await answerOf(ctx).json()) as { result: unknown };
  }

  it('tools/list (strict): the answer phase removes the tools the caller may not call', async () => {
    const { inst } = await create({ files: ['all.yaml'] }, dir);
    const listing = { jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'echo' }, { name: 'admin-reset' }] } };
    const user = context('tools/list', undefined, { caller: { id: 'bob', authenticated: true, attributes: {} } });
    expect((await listThrough(inst, user, listing)).result).toEqual({ tools: [{ name: 'echo' }] });
    expect(user.state.annotations.policy_hidden_tools).toEqual(['admin-reset']);
    const admin = context('tools/list', undefined, {
      caller: { id: 'alice', authenticated: true, attributes: { role: 'admin' } },
    });
    expect((await listThrough(inst, admin, listing)).result).toEqual(listing.result);
    const permissive = context('tools/list', undefined, { mode: 'permissive' });
    expect((await listThrough(inst, permissive, listing)).result).toEqual(listing.result);
    expect(permissive.state.annotations.policy_hidden_tools).toBeUndefined();
  });

  it('tools/list: a tool blocked only for some arguments stays listed, and those calls are still refused', async () => {
    const d = tempDir();
    writePolicy(d, 'p.yaml', {
      name: 'fetching',
      rules: [
        {
          id: 'inline-data-only',
          when: {
            and: [
              { '==': [{ var: 'tool' }, 'fetch-url'] },
              { '!==': [{ substr: [{ var: ['arguments.url', ''] }, 0, 5] }, 'data:'] },
            ],
          },
          action: 'deny',
        },
        { id: 'never-wipe', when: { '==': [{ var: 'tool' }, 'wipe'] }, action: 'deny' },
      ],
    });
    writePolicy(d, 'q.yaml', {
      name: 'exceptions',
      rules: [
        // An allow that depends on the arguments is an exception to the later block: not decidable from a list.
        { id: 'forced-reset', when: { '==': [{ var: 'arguments.force' }, true] }, action: 'allow' },
        { id: 'no-reset', when: { '==': [{ var: 'tool' }, 'reset'] }, action: 'deny' },
      ],
    });
    const { inst } = await create({ files: ['p.yaml', 'q.yaml'] }, d);
    const listing = {
      jsonrpc: '2.0',
      id: 1,
      result: { tools: [{ name: 'fetch-url' }, { name: 'wipe' }, { name: 'reset' }] },
    };
    const listed = await listThrough(inst, context('tools/list', undefined), listing);
    expect(listed.result).toEqual({ tools: [{ name: 'fetch-url' }, { name: 'reset' }] });
    expect((await run(inst, callOf('fetch-url', { url: 'https://example.com/x' }))).error?.kind).toBe(
      'policy_violation',
    );
    expect((await run(inst, callOf('fetch-url', { url: 'data:text/plain,hi' }))).forwarded).toBe(true);
    expect((await run(inst, callOf('reset', { force: true }))).forwarded).toBe(true);
    expect((await run(inst, callOf('reset'))).error?.kind).toBe('policy_violation');
  });
});

describe('policy reload', () => {
  it('re-reads the files; a broken file is refused and the old set stays', async () => {
    const dir = tempDir();
    writePolicy(dir, 'p.yaml', {
      name: 'p',
      rules: [{ id: 'a', when: { '==': [{ var: 'tool' }, 'one'] }, action: 'deny' }],
    });
    const { inst } = await create({ files: ['p.yaml'] }, dir);
    expect((await run(inst, callOf('one'))).error?.kind).toBe('policy_violation');
    writePolicy(dir, 'p.yaml', {
      name: 'p',
      rules: [{ id: 'a', when: { '==': [{ var: 'tool' }, 'two'] }, action: 'deny' }],
    });
    await inst.reload?.();
    expect((await run(inst, callOf('one'))).forwarded).toBe(true);
    expect((await run(inst, callOf('two'))).error?.kind).toBe('policy_violation');
    writePolicy(dir, 'p.yaml', { name: 'p', rules: [{ id: 'b', when: { nope: 1 }, action: 'deny' }] });
    await expect(inst.reload?.()).rejects.toThrow(/rule "b": when: unknown json-logic operator "nope"/);
    expect((await run(inst, callOf('two'))).error?.kind).toBe('policy_violation');
  });
});

describe('policy in a service (shipped registry)', () => {
  let svc: StartedService;
  beforeAll(async () => {
    const dir = tempDir();
    writePolicy(dir, 'callers.yaml', {
      name: 'callers',
      description: 'get-sum is for admins',
      rules: [
        {
          id: 'sum-admins-only',
          when: {
            and: [{ '==': [{ var: 'tool' }, 'get-sum'] }, { '!=': [{ var: 'caller.attributes.role' }, 'admin'] }],
          },
          action: 'deny',
          detail: 'get-sum is reserved to admins',
        },
      ],
    });
    const route = (path: string, mode: string, options: Record<string, unknown> = {}) => `
  - match: { method: POST, path: ${path} }
    mode: ${mode}
    dialect: jsonrpc
    pipeline:
      - jsonrpc-parse: {}
      - stype-resolve: { registry: registry }
      - policy: ${JSON.stringify({ registry: 'registry', classifiers: 'classifiers', files: ['callers.yaml'], ...options })}
      - proxy: { upstream: everything }`;
    const yaml = `
service: policy-test
version: 0.0.1
listen: { port: 0 }
auth:
  enabled: true
  token_header: X-Proxy-Token
  tokens:
    - { name: alice, token: alice-token, attributes: { role: admin } }
    - { name: bob, token: bob-token }
upstreams:
  everything: ${everythingStdioYaml}
resources:
  registry: ${shippedRegistryYaml}
  classifiers:
    type: classifier-set
    classifiers: [{ name: prompt_injection, type: pattern, detectors: [prompt_injection, jailbreak] }]
routes:${route('/strict', 'strict')}${route('/permissive', 'permissive')}${route('/unfiltered', 'strict', { filter_list: false })}
`;
    svc = await startService(writeServiceFile(yaml, dir));
  });
  afterAll(async () => {
    await svc?.close();
  });

  async function rpc(path: string, token: string, method: string, params?: unknown) {
    const res = await postRpc(
      svc.url + path,
      { jsonrpc: '2.0', id: 42, method, ...(params ? { params } : {}) },
      { 'x-proxy-token': token },
    );
    return { status: res.status, body: await res.json() };
  }
  const names = (body: { result: { tools: Array<{ name: string }> } }) => body.result.tools.map((t) => t.name);

  it('strict: tools/call of get-env is answered 403 with -32603 "Policy violation" {policy, detail}', async () => {
    const r = await rpc('/strict', 'alice-token', 'tools/call', { name: 'get-env', arguments: {} });
    expect(r.status).toBe(403);
    expect(r.body).toEqual({
      jsonrpc: '2.0',
      id: 42,
      error: {
        code: -32603,
        message: 'Policy violation',
        data: { policy: 'deny-env-disclosure', detail: "get-env discloses the server's environment variables" },
      },
    });
  });

  it('strict: tools/list shows each caller only the tools it may call', async () => {
    const bob = names((await rpc('/strict', 'bob-token', 'tools/list')).body);
    expect(bob).toContain('echo');
    expect(bob).not.toContain('get-env');
    expect(bob).not.toContain('get-sum');
    const alice = names((await rpc('/strict', 'alice-token', 'tools/list')).body);
    expect(alice).toContain('get-sum');
    expect(alice).not.toContain('get-env');
    expect(names((await rpc('/unfiltered', 'bob-token', 'tools/list')).body)).toContain('get-env');
  });

  it('caller attributes decide a call', async () => {
    expect(
      (await rpc('/strict', 'bob-token', 'tools/call', { name: 'get-sum', arguments: { a: 1, b: 2 } })).status,
    ).toBe(403);
    const ok = await rpc('/strict', 'alice-token', 'tools/call', { name: 'get-sum', arguments: { a: 1, b: 2 } });
    expect(ok.status).toBe(200);
    expect(ok.body.result.content[0].text).toContain('3');
  });

  it('permissive: nothing is refused or hidden', async () => {
    expect(names((await rpc('/permissive', 'bob-token', 'tools/list')).body)).toContain('get-env');
    const r = await rpc('/permissive', 'bob-token', 'tools/call', { name: 'get-sum', arguments: { a: 2, b: 2 } });
    expect(r.status).toBe(200);
  });
});
