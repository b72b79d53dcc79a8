/**
 * schema-validate in a real service: the MCP reference server behind the proxy (stdio), a
 * registry written for this test and loaded by the real stype-registry resource, one route per
 * enforcement mode. Covers the strict 422 body, permissive/audit forwarding, `$.arguments.x`
 * paths, result validation, unknown STypes and tool pinning (flag / enforce).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { everythingServer, everythingStdioYaml } from '../helpers/servers.ts';
import { postRpc, shippedRegistryYaml, writeServiceFile } from '../helpers/services.ts';

/** tools/list straight from the reference server (to pin the tools as "approved"). */
async function listTools(): Promise<Array<Record<string, unknown>>> {
  const child = spawn(process.execPath, [everythingServer, 'stdio'], { stdio: ['pipe', 'pipe', 'ignore'] });
  try {
    const lines = createInterface({ input: child.stdout });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })}\n`);
    for await (const line of lines) {
      const msg = JSON.parse(line) as { id?: number; result?: { tools: Array<Record<string, unknown>> } };
      if (msg.id === 1 && msg.result) return msg.result.tools;
    }
    throw new Error('no tools/list answer');
  } finally {
    child.kill();
  }
}

const pin = (t: Record<string, unknown>) =>
  sha256Hex(canonicalJson({ name: t.name, description: t.description, inputSchema: t.inputSchema }));

function stype(id: string, schema: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    id,
    status: 'approved',
    version: '1.0.0',
    description: `test SType ${id}`,
    samples: 1,
    created_at: '2025-01-01T00:00:00Z',
    updated_at: '2025-01-02T00:00:00Z',
    schema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: id,
      title: id,
      description: id,
      type: 'object',
      required: [],
      ...schema,
    },
    qom_profiles: ['default'],
    policies: [],
    ...extra,
  };
}

function writeRegistry(dir: string, stypes: Array<ReturnType<typeof stype>>): void {
  mkdirSync(join(dir, 'stypes'), { recursive: true });
  mkdirSync(join(dir, 'policies'), { recursive: true });
  for (const s of stypes) writeFileSync(join(dir, 'stypes', `${s.id}.yaml`), JSON.stringify(s));
  writeFileSync(
    join(dir, 'profiles.yaml'),
    JSON.stringify({
      profiles: [{ name: 'default', description: 'd', threshold: 0.5, dimensions: ['completeness', 'schema_conform'] }],
    }),
  );
}

let svc: StartedService;
let echoHash: string;

beforeAll(async () => {
  const tools = await listTools();
  const byName = new Map(tools.map((t) => [t.name as string, t]));
  echoHash = pin(byName.get('echo')!);
  const dir = mkdtempSync(join(tmpdir(), 'sv-test-'));
  writeRegistry(join(dir, 'registry'), [
    stype(
      'everything.echo',
      {
        properties: { message: { type: 'string', minLength: 2, maxLength: 50 }, loud: { type: 'boolean' } },
        required: ['message'],
        additionalProperties: false,
      },
      { pinned_tool_hash: `sha256:${echoHash}` },
    ),
    // Pinned to a definition the server no longer has: this tool has "drifted".
    stype(
      'everything.get-sum',
      { properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
      { pinned_tool_hash: pin({ ...byName.get('get-sum')!, description: 'Returns the sum of two numbers (v0)' }) },
    ),
    // The real result has no `pressure`: every result fails this output schema.
    stype(
      'everything.get-structured-content',
      { properties: { location: { enum: ['New York', 'Chicago', 'Los Angeles'] } }, required: ['location'] },
      {
        output_schema: {
          type: 'object',
          properties: { temperature: { type: 'number' }, pressure: { type: 'number' } },
          required: ['temperature', 'pressure'],
        },
      },
    ),
    stype(
      'mcp.resources.read',
      { properties: { uri: { type: 'string', format: 'uri' } }, required: ['uri'] },
      {
        match: { method: 'resources/read' },
      },
    ),
  ]);
  const route = (path: string, mode: string, options: Record<string, unknown> = {}) => `
  - match: { method: POST, path: ${path} }
    mode: ${mode}
    dialect: jsonrpc
    pipeline:
      - jsonrpc-parse: {}
      - stype-resolve: { registry: registry }
      - schema-validate: ${JSON.stringify({ registry: 'registry', ...options })}
      - proxy: { upstream: everything }`;
  const yaml = `
service: schema-validate-test
version: 0.0.1
listen: { port: 0 }
metrics: { port: 0 }
dialect: simple
upstreams:
  everything: ${everythingStdioYaml}
resources:
  registry: { type: stype-registry, dir: ./registry, namespace: everything }
pipeline:
  - response-headers:
      set:
        X-Valid: validation.valid
        X-Violations: { path: validation.violations }
        X-Result-Valid: resultValidation.valid
        X-Drifted: annotations.drifted_tools
        X-Tool-Drift: annotations.tool_drift.tool
routes:${route('/strict', 'strict')}${route('/permissive', 'permissive')}${route('/audit', 'audit')}${route(
    '/reject-unknown',
    'strict',
    { unknown_stype: 'reject' },
  )}${route('/strict-flag', 'strict', { pin_check: 'flag' })}${route('/permissive-enforce', 'permissive', {
    pin_check: 'enforce',
  })}${route('/no-results', 'strict', { validate_results: false })}
`;
  svc = await startService(writeServiceFile(yaml, dir));
});

afterAll(async () => {
  await svc?.close();
});

let nextId = 1;
async function rpc(path: string, method: string, params?: Record<string, unknown>) {
  const id = nextId++;
  const res = await postRpc(svc.url + path, { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
  return { id, status: res.status, headers: res.headers, body: await res.json() };
}
const call = (path: string, name: string, args: Record<string, unknown>) =>
  rpc(path, 'tools/call', { name, arguments: args });

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('schema-validate: request validation', () => {
  it('strict: forwards a valid message', async () => {
    const r = await call('/strict', 'echo', { message: 'hello there' });
    expect(r.status).toBe(200);
    expect(r.body.result.content[0].text).toContain('hello there');
    expect(r.headers.get('x-valid')).toBe('true');
  });

  it('strict: 422 with -32602, the SType and every violation at $.arguments.<field>; the id echoed', async () => {
    const r = await call('/strict', 'echo', { message: 'x', loud: 'yes', extra: 1 });
    expect(r.status).toBe(422);
    expect(r.body).toEqual({
      jsonrpc: '2.0',
      id: r.id,
      error: {
        code: -32602,
        message: 'Schema validation failed',
        data: {
          stype: 'everything.echo',
          violations: expect.arrayContaining([
            { path: '$.arguments.message', message: expect.stringContaining('2') },
            { path: '$.arguments.loud', message: expect.stringContaining('boolean') },
            { path: '$.arguments.extra', message: expect.any(String) },
          ]),
        },
      },
    });
    expect(r.body.error.data.violations).toHaveLength(3);
    // Diagnostic headers still say what was decided.
    expect(r.headers.get('x-valid')).toBe('false');
  });

  it('strict: a missing required argument points at the field', async () => {
    const r = await call('/strict', 'echo', {});
    expect(r.status).toBe(422);
    expect(r.body.error.data.violations).toEqual([{ path: '$.arguments.message', message: 'is required' }]);
  });

  it('other methods validate params, with paths $.<field>', async () => {
    const r = await rpc('/strict', 'resources/read', { uri: 42 });
    expect(r.status).toBe(422);
    expect(r.body.error.data.stype).toBe('mcp.resources.read');
    expect(r.body.error.data.violations[0].path).toBe('$.uri');
  });

  it('permissive: forwards an invalid message, annotates it and counts it', async () => {
    const before = await metric('switchyard_schema_violations_total', { stype: 'everything.echo', mode: 'permissive' });
    const r = await call('/permissive', 'echo', { message: 'x' });
    expect(r.status).toBe(200);
    expect(r.body.result.content[0].text).toContain('x');
    expect(r.headers.get('x-valid')).toBe('false');
    expect(JSON.parse(r.headers.get('x-violations')!)).toEqual([
      { path: '$.arguments.message', message: expect.any(String) },
    ]);
    expect(await metric('switchyard_schema_violations_total', { stype: 'everything.echo', mode: 'permissive' })).toBe(
      before + 1,
    );
  });

  it('audit: forwards and counts', async () => {
    const r = await call('/audit', 'echo', { message: 'x' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-valid')).toBe('false');
    expect(await metric('switchyard_schema_violations_total', { stype: 'everything.echo', mode: 'audit' })).toBe(1);
  });

  it('unknown SType: allowed by default, a violation at $ with unknown_stype: reject', async () => {
    const ok = await call('/strict', 'get-tiny-image', {});
    expect(ok.status).toBe(200);
    const r = await call('/reject-unknown', 'get-tiny-image', {});
    expect(r.status).toBe(422);
    expect(r.body.error.data.violations).toEqual([
      { path: '$', message: 'no SType is registered for tool "get-tiny-image"' },
    ]);
  });
});

describe('schema-validate: result validation', () => {
  it('strict: a result that fails the output schema becomes a -32603 error with the same id', async () => {
    const r = await call('/strict', 'get-structured-content', { location: 'Chicago' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      jsonrpc: '2.0',
      id: r.id,
      error: {
        code: -32603,
        message: 'Result validation failed',
        data: {
          stype: 'everything.get-structured-content',
          violations: [{ path: '$.result.structuredContent.pressure', message: 'is required' }],
        },
      },
    });
    expect(r.headers.get('x-result-valid')).toBe('false');
  });

  it('permissive: the result is forwarded and annotated', async () => {
    const r = await call('/permissive', 'get-structured-content', { location: 'Chicago' });
    expect(r.body.result.structuredContent.temperature).toEqual(expect.any(Number));
    expect(r.headers.get('x-result-valid')).toBe('false');
    expect(
      await metric('switchyard_result_violations_total', {
        stype: 'everything.get-structured-content',
        mode: 'permissive',
      }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('validate_results: false leaves results alone', async () => {
    const r = await call('/no-results', 'get-structured-content', { location: 'Chicago' });
    expect(r.body.result.structuredContent).toBeDefined();
    expect(r.headers.get('x-result-valid')).toBeNull();
  });
});

describe('schema-validate: tool pinning', () => {
  it('flag: tools/list keeps a drifted tool, flags it and counts it', async () => {
    const r = await rpc('/strict-flag', 'tools/list');
    const names = (r.body.result.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).toContain('get-sum');
    expect(names).toContain('echo');
    expect(JSON.parse(r.headers.get('x-drifted')!)).toEqual(['get-sum']);
    expect(await metric('switchyard_tool_drift_total', { tool: 'get-sum' })).toBeGreaterThanOrEqual(1);
    const c = await call('/strict-flag', 'get-sum', { a: 1, b: 2 });
    expect(c.status).toBe(200);
    expect(c.headers.get('x-tool-drift')).toBe('get-sum');
  });

  it('enforce (strict default): a drifted tool is removed from tools/list and its call refused', async () => {
    const r = await rpc('/strict', 'tools/list');
    const names = (r.body.result.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).not.toContain('get-sum');
    expect(names).toContain('echo'); // pinned and unchanged
    const c = await call('/strict', 'get-sum', { a: 1, b: 2 });
    expect(c.status).toBe(403);
    expect(c.body.error).toEqual({
      code: -32603,
      message: 'Policy violation',
      data: {
        policy: 'tool-pinning',
        detail: expect.stringContaining('the definition of tool "get-sum" changed since it was approved'),
      },
    });
    expect((await call('/strict', 'echo', { message: 'still fine' })).status).toBe(200);
  });

  it('pin_check overrides the mode default; drift is known per stage once it has seen a tools/list', async () => {
    expect((await call('/permissive-enforce', 'get-sum', { a: 1, b: 2 })).status).toBe(200);
    await rpc('/permissive-enforce', 'tools/list');
    const c = await call('/permissive-enforce', 'get-sum', { a: 1, b: 2 });
    expect(c.status).toBe(403);
    const ok = await call('/permissive', 'get-sum', { a: 1, b: 2 });
    expect(ok.status).toBe(200);
  });
});

describe('schema-validate over the shipped registry (configs/registry)', () => {
  let shipped: StartedService;
  beforeAll(async () => {
    const yaml = `
service: schema-validate-shipped
version: 0.0.1
listen: { port: 0 }
mode: strict
upstreams:
  everything: ${everythingStdioYaml}
resources:
  registry: ${shippedRegistryYaml}
routes:
  - match: { method: POST, path: / }
    dialect: jsonrpc
    pipeline:
      - jsonrpc-parse: {}
      - stype-resolve: { registry: registry }
      - schema-validate: { registry: registry }
      - proxy: { upstream: everything }
`;
    shipped = await startService(writeServiceFile(yaml));
  });
  afterAll(async () => {
    await shipped?.close();
  });

  const post = async (body: unknown) => {
    const res = await postRpc(`${shipped.url}/`, body);
    return { status: res.status, body: await res.json() };
  };

  it('rejects a wrongly typed echo argument with the seed body', async () => {
    const r = await post({
      jsonrpc: '2.0',
      id: 'a1',
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 42 } },
    });
    expect(r.status).toBe(422);
    expect(r.body).toEqual({
      jsonrpc: '2.0',
      id: 'a1',
      error: {
        code: -32602,
        message: 'Schema validation failed',
        data: { stype: 'everything.echo', violations: [{ path: '$.arguments.message', message: 'must be string' }] },
      },
    });
  });

  it('the real structured result passes its output schema; no shipped pin has drifted', async () => {
    const r = await post({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'get-structured-content', arguments: { location: 'Chicago' } },
    });
    expect(r.status).toBe(200);
    expect(r.body.result.structuredContent).toBeDefined();
    const list = await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
    const names = (list.body.result.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['echo', 'get-sum', 'get-structured-content']));
  });
});
