/**
 * Hostile tool schemas (MCP 2026-07-28, SEP-2106) through the real typed proxy
 * (configs/typed-proxy.yaml) in front of a JSON-RPC upstream that lists the tools a test gives it:
 * deep composition, thousands of subschemas, references out of the document (a URL served here,
 * which must never be fetched), an unknown dialect, a lookaround pattern and a reference explosion
 * are refused at pin time (withheld from tools/list with the reason, in the audit trail, and
 * their calls refused); sound 2020-12 and draft-07 schemas pass. A registered SType whose schema
 * holds a catastrophic pattern is validated on the linear engine, and a value too large for its
 * counted work budget fails with the reason; one over the compile bound (600 alternatives on every
 * item) is refused at pin time, and a registered SType over it fails every call: outcomes and
 * counted work, never a clock.
 */
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../plugins/audit-chain/api.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { openChain } from '../fixtures/audit-helpers.ts';
import { alternatives, refExplosion } from '../helpers/hostile-schemas.ts';

type Tool = Record<string, unknown>;

const tool = (name: string, inputSchema: unknown, extra: Tool = {}): Tool => ({
  name,
  description: `The ${name} tool.`,
  inputSchema,
  ...extra,
});

const nested = (key: string, depth: number) => {
  let s: unknown = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { [key]: [s, { minLength: 1 }] };
  return { type: 'object', properties: { q: s } };
};

/** Sound schemas: every 2020-12 applicator, and draft-07 named explicitly. */
const sound: Tool[] = [
  tool('clock', { type: 'object', properties: { zone: { type: 'string' } } }),
  tool('lookup', {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: { id: { $anchor: 'id', type: 'string', pattern: '^[a-z0-9-]{1,64}$' } },
    oneOf: [{ required: ['id'] }, { required: ['name'] }],
    properties: {
      id: { $ref: '#id' },
      name: { type: 'string', minLength: 1 },
      point: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], items: false },
      card: { type: 'string' },
    },
    dependentSchemas: { card: { required: ['name'] } },
    unevaluatedProperties: false,
  }),
  tool('legacy', {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    definitions: { n: { type: 'integer' } },
    properties: { n: { $ref: '#/definitions/n' }, pair: { type: 'array', items: [{ type: 'string' }] } },
  }),
];

let refHits = 0;
let refServer: Server;
let refUrl = '';

/** Hostile schemas, by tool name, with a phrase of the reason each is refused for. */
function hostile(): Array<{ tool: Tool; reason: string }> {
  return [
    { tool: tool('deep-allof', nested('allOf', 200)), reason: 'nested deeper than 32 levels' },
    { tool: tool('deep-anyof', nested('anyOf', 40)), reason: 'nested deeper than 32 levels' },
    {
      tool: tool('many-subschemas', {
        type: 'object',
        anyOf: Array.from({ length: 3000 }, (_, i) => ({ required: [`k${i}`] })),
      }),
      reason: 'more than 2000 subschemas',
    },
    {
      tool: tool('remote-ref', { type: 'object', properties: { q: { $ref: refUrl } } }),
      reason: 'does not resolve inside the schema',
    },
    {
      tool: tool('file-ref', { type: 'object', properties: { q: { $ref: 'common.json#/$defs/q' } } }),
      reason: 'does not resolve inside the schema',
    },
    {
      tool: tool('unknown-anchor', { type: 'object', properties: { q: { $ref: '#nowhere' } } }),
      reason: 'does not resolve inside the schema',
    },
    {
      tool: tool('old-dialect', { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }),
      reason: 'unsupported JSON Schema dialect',
    },
    {
      tool: tool('lookaround', { type: 'object', properties: { q: { type: 'string', pattern: '^(?!(a+)+$)' } } }),
      reason: 'cannot be matched in linear time',
    },
    { tool: tool('explosion', refExplosion(40, 'q')), reason: 'units of work, over 2000000' },
    { tool: tool('wide-anyof', alternatives(600, 'q')), reason: 'over 300: too large to compile' },
    { tool: tool('wider-anyof', alternatives(1900, 'q')), reason: 'over 300: too large to compile' },
    {
      tool: tool('bad-output', { type: 'object' }, { outputSchema: { $ref: `${refUrl}#/out` } }),
      reason: 'outputSchema: $ref',
    },
  ];
}

let listed: Tool[] = [];
const calls: string[] = [];
let upstream: Server;
let upstreamUrl: string;

beforeAll(async () => {
  refServer = createServer((_req, res) => {
    refHits++;
    res.writeHead(200, { 'content-type': 'application/schema+json' });
    res.end('{"type":"string"}');
  });
  await new Promise<void>((r) => refServer.listen(0, '127.0.0.1', r));
  refUrl = `http://127.0.0.1:${(refServer.address() as AddressInfo).port}/schema.json`;
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const msg = JSON.parse(body) as { id?: unknown; method?: string; params?: { name?: string } };
      const reply = (result: unknown) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
      };
      if (msg.method === 'tools/list') return reply({ tools: listed });
      if (msg.method === 'tools/call') {
        calls.push(String(msg.params?.name));
        return reply({ content: [{ type: 'text', text: 'done' }] });
      }
      reply({});
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise<void>((r) => upstream.close(() => r()));
  await new Promise<void>((r) => refServer.close(() => r()));
});

/** The shipped registry plus `match-word`, whose schema holds a catastrophic pattern and uniqueItems. */
function registryWithHostileSType(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'typed-proxy-registry-')), 'registry');
  cpSync('configs/registry', dir, { recursive: true });
  writeFileSync(
    join(dir, 'stypes', 'everything.match-word.yaml'),
    [
      'id: everything.match-word',
      'status: approved',
      'version: 1.0.0',
      'description: A word of a letters only, checked by a pattern that backtracks exponentially on a backtracking engine.',
      'samples: 1',
      'created_at: 2026-11-29T00:00:00Z',
      'updated_at: 2026-11-29T00:00:00Z',
      'match: { method: tools/call, tool: match-word }',
      'schema:',
      '  $schema: https://json-schema.org/draft/2020-12/schema',
      '  $id: everything.match-word',
      '  title: Match-word arguments',
      '  description: The word, and tags that must differ.',
      '  type: object',
      '  properties:',
      "    word: { type: string, pattern: '^(a+)+$' }",
      '    tags: { type: array, uniqueItems: true }',
      '  required: [word]',
      'qom_profiles: [default]',
      'policies: [default]',
      '',
    ].join('\n'),
  );
  // Registered, but over the compile bound: refused at its first use, every call fails with the reason.
  writeFileSync(
    join(dir, 'stypes', 'everything.wide-choice.yaml'),
    [
      'id: everything.wide-choice',
      'status: approved',
      'version: 1.0.0',
      'description: Items that must each match one of 600 shapes.',
      'samples: 1',
      'created_at: 2026-11-30T00:00:00Z',
      'updated_at: 2026-11-30T00:00:00Z',
      'match: { method: tools/call, tool: wide-choice }',
      `schema: ${JSON.stringify({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        $id: 'everything.wide-choice',
        title: 'Wide-choice arguments',
        description: 'Items, each of one of 600 shapes.',
        ...alternatives(600, 'q'),
        required: [],
      })}`,
      'qom_profiles: [default]',
      'policies: [default]',
      '',
    ].join('\n'),
  );
  return dir;
}

const auditPath = join(mkdtempSync(join(tmpdir(), 'typed-proxy-audit-')), 'audit.db');

function startProxy(mode: 'strict' | 'permissive', registry?: string): Promise<StartedService> {
  return startService('configs/typed-proxy.yaml', {
    set: [
      `upstreams.everything={kind: jsonrpc, url: "${upstreamUrl}"}`,
      `mode=${mode}`,
      ...(registry ? [`resources.registry.dir=${registry}`] : []),
    ],
    env: { PROXY_AUDIT_PATH: auditPath },
  });
}

let id = 0;
async function rpc(svc: StartedService, method: string, params: unknown = {}) {
  const res = await fetch(`${svc.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
  });
  return { res, body: await res.json() };
}

const names = (body: { result?: { tools?: Tool[] } }) => (body.result?.tools ?? []).map((t) => t.name);

describe('strict mode', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startProxy('strict', registryWithHostileSType());
  });
  afterAll(() => svc?.close());

  it('withholds every tool with a hostile schema at pin time, keeps the sound ones, and fetches nothing', async () => {
    const cases = hostile();
    listed = [...sound, ...cases.map((c) => c.tool)];
    const { res, body } = await rpc(svc, 'tools/list');
    expect(res.status).toBe(200);
    expect(names(body)).toEqual(sound.map((t) => t.name));
    const withheld = JSON.parse(res.headers.get('x-proxy-tools-withheld') ?? '[]');
    expect(withheld.sort()).toEqual(cases.map((c) => c.tool.name).sort());
    expect(refHits).toBe(0);
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_tool_schema_refused_total\{[^}]*tool="remote-ref"[^}]*\} 1\n/);
  });

  it('refuses a call naming a withheld tool with the reason; the upstream never sees it', async () => {
    const before = calls.length;
    for (const { tool: t, reason } of hostile()) {
      const { res, body } = await rpc(svc, 'tools/call', { name: t.name, arguments: { q: 'x' } });
      expect(res.status).toBe(403);
      expect(body.error.data).toMatchObject({ policy: 'tool-schema' });
      expect(body.error.data.detail).toContain(reason);
    }
    expect(calls.length).toBe(before);
    expect(refHits).toBe(0);
  });

  it('a tool listed sound again is callable again', async () => {
    listed = [...sound, tool('remote-ref', { type: 'object', properties: { q: { type: 'string' } } })];
    const { body } = await rpc(svc, 'tools/list');
    expect(names(body)).toContain('remote-ref');
    const call = await rpc(svc, 'tools/call', { name: 'remote-ref', arguments: { q: 'x' } });
    expect(call.body.result).toBeDefined();
  });

  it('validates a catastrophic pattern on the linear engine: a long non-matching word is answered with the violation', async () => {
    // 600,000 characters that ^(a+)+$ backtracks on exponentially: RE2 scans them once.
    const { res, body } = await rpc(svc, 'tools/call', {
      name: 'match-word',
      arguments: { word: `${'a'.repeat(600_000)}!` },
    });
    expect(res.status).toBe(422);
    expect(body.error.code).toBe(-32602);
    // The verdict, and that listing every violation would cost over the budget (each check may fail).
    expect(body.error.data.violations).toEqual([
      { path: '$.arguments.word', message: 'must match pattern "^(a+)+$"' },
      { path: '$.arguments', message: 'may have more violations: too large to list them all' },
    ]);
    const short = await rpc(svc, 'tools/call', { name: 'match-word', arguments: { word: `${'a'.repeat(5000)}!` } });
    expect(short.body.error.data.violations).toEqual([
      { path: '$.arguments.word', message: 'must match pattern "^(a+)+$"' },
    ]);
    const ok = await rpc(svc, 'tools/call', { name: 'match-word', arguments: { word: 'aaaa' } });
    expect(ok.body.result).toBeDefined();
  });

  it('a value whose counted work is over the budget fails closed with the reason, before ajv runs', async () => {
    // 3 units per character for the pattern: 900,000 characters are 2.7M units, over 2M.
    const long = await rpc(svc, 'tools/call', { name: 'match-word', arguments: { word: 'a'.repeat(900_000) } });
    expect(long.body.error.code).toBe(-32602);
    expect(long.body.error.data.violations).toEqual([
      {
        path: '$.arguments',
        message: expect.stringMatching(/over 2000000 units of work .* too large for this schema/),
      },
    ]);
    // uniqueItems compares pairwise: 1,000 objects are 1,000,000 pairs at 5 units, over the budget; 100 are not.
    const tags = (n: number) => Array.from({ length: n }, (_, i) => ({ i }));
    const pairs = await rpc(svc, 'tools/call', { name: 'match-word', arguments: { word: 'a', tags: tags(1000) } });
    expect(pairs.body.error.data.violations[0].message).toContain('too large for this schema');
    const few = await rpc(svc, 'tools/call', { name: 'match-word', arguments: { word: 'a', tags: tags(100) } });
    expect(few.body.result).toBeDefined();
  });

  it('a registered SType over the compile bound fails every call with the reason, never forwarded', async () => {
    const before = calls.length;
    for (let i = 0; i < 2; i++) {
      const { res, body } = await rpc(svc, 'tools/call', { name: 'wide-choice', arguments: { q: [{ k1: 1 }] } });
      expect(res.status).toBe(422);
      expect(body.error.code).toBe(-32602);
      expect(body.error.data.violations).toEqual([
        {
          path: '$.arguments',
          message: expect.stringMatching(/^its schema is refused: compiling it would take \d+ units of work, over 300/),
        },
      ]);
    }
    expect(calls.length).toBe(before);
  });

  it('records the refusals in the audit trail with their reasons', async () => {
    listed = [...sound, ...hostile().map((c) => c.tool)];
    await rpc(svc, 'tools/list');
    await rpc(svc, 'tools/call', { name: 'explosion', arguments: {} });
    const chain = await openChain({ backend: 'sqlite', path: auditPath });
    let records: AuditRecord[];
    try {
      records = (await chain.value.query({ limit: 1000 })).records;
    } finally {
      await chain.close?.();
    }
    const listing = records.find((r) => r.rule === 'tool-schema' && r.phase === 'tools');
    expect(listing?.action).toBe('block');
    expect(listing?.details).toMatchObject({ withheld: true });
    const reasons = listing?.details.reasons as Record<string, string>;
    for (const { tool: t, reason } of hostile()) expect(reasons[t.name as string]).toContain(reason);
    const call = records.find(
      (r) => r.rule === 'tool-schema' && r.phase === 'ingress' && r.details.tool === 'explosion',
    );
    expect(call?.action).toBe('block');
  });
});

describe('permissive mode', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startProxy('permissive');
  });
  afterAll(() => svc?.close());

  it('flags hostile schemas without withholding them, and still fetches nothing', async () => {
    listed = [...sound, ...hostile().map((c) => c.tool)];
    const { res, body } = await rpc(svc, 'tools/list');
    expect(names(body)).toEqual(listed.map((t) => t.name));
    expect(res.headers.get('x-proxy-tools-withheld')).toBeNull();
    expect(refHits).toBe(0);
  });
});
