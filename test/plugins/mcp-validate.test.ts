/**
 * The MCP protocol check of the mcp-validate stage (plugins/mcp-validate/protocol.ts) against
 * every vendored protocol version: each malformed message is refused with the JSON path of what
 * is wrong, each valid one passes, methods no version defines are left alone. Messages go through
 * JSON text first, as the proxy reads them (1e400 is Infinity once parsed).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkModern, metaVersionOf } from '../../plugins/mcp-validate/modern.ts';
import {
  McpProtocol,
  modernVersions,
  protocolVersions,
  supportedVersions,
} from '../../plugins/mcp-validate/protocol.ts';
import { decodeMcpHeaderValue as decodeHeaderValue, GatewayError, type JsonRpcRequest } from '../../runtime/index.ts';
import { malformedMessage, toBody, validMessage } from '../helpers/mcp-messages.ts';

const protocol = new McpProtocol({ nameMaxLength: 128, uriMaxLength: 8192 });
const parsed = (m: Record<string, unknown>) => JSON.parse(toBody(m)) as Record<string, unknown>;

describe('McpProtocol.check', () => {
  it('vendors the versions the MCP SDK servers negotiate (but the pre-release 2024-10-07)', () => {
    expect([...protocolVersions]).toEqual(['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']);
  });

  for (const version of protocolVersions) {
    it(`${version}: every malformed message is refused, with a path; every valid one passes`, () => {
      fc.assert(
        fc.property(malformedMessage(), (m) => {
          const problem = protocol.check(parsed(m), version);
          expect(problem).toBeDefined();
          expect(problem!.path).toMatch(/^\$/);
          expect([-32600, -32602]).toContain(problem!.code);
        }),
        { seed: 2911, numRuns: 400 },
      );
      fc.assert(
        fc.property(validMessage(), (m) => {
          expect(protocol.check(parsed(m), version)).toBeUndefined();
        }),
        { seed: 2912, numRuns: 200 },
      );
    });
  }

  it('names the path and the problem: the cases of issue 29', () => {
    const call = (params: unknown) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params });
    expect(protocol.check(call([1, 2]), '2025-06-18')).toEqual({
      code: -32602,
      path: '$.params',
      message: 'must be object',
      schemaVersion: '2025-06-18',
    });
    expect(protocol.check(call({ name: ['echo'] }), '2025-11-25')).toMatchObject({
      code: -32602,
      path: '$.params.name',
      message: 'must be string',
    });
    expect(protocol.check(call({ name: { a: 1 } }), '2024-11-05')).toMatchObject({ path: '$.params.name' });
    expect(protocol.check(call({ name: 'x'.repeat(500 * 1024) }), '2025-11-25')).toMatchObject({
      code: -32602,
      path: '$.params.name',
      message: 'must NOT have more than 128 characters',
    });
    expect(protocol.check(call({ name: 'x'.repeat(128), arguments: {} }), '2025-11-25')).toBeUndefined();
    // A method a version does not define is checked against the newest that does.
    expect(
      protocol.check({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 5 } }, '2025-06-18'),
    ).toMatchObject({ path: '$.params.taskId', schemaVersion: '2025-11-25' });
  });

  it('leaves methods no version defines to the server, once their envelope is valid', () => {
    for (const method of ['foo/bar', 'constructor', '__proto__', 'toString', 'Tools/Call', 'tools/call ']) {
      expect(protocol.check({ jsonrpc: '2.0', id: 1, method, params: { any: [1] } }, '2025-06-18')).toBeUndefined();
      expect(protocol.check({ jsonrpc: '2.0', id: 1, method, params: [1, 2] }, '2025-06-18')).toMatchObject({
        code: -32602,
        path: '$.params',
      });
    }
  });

  it('cuts a long key in the path it reports', () => {
    const key = 'k'.repeat(10_000);
    const problem = protocol.check(
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'completion/complete',
        params: {
          ref: { type: 'ref/prompt', name: 'p' },
          argument: { name: 'a', value: 'b' },
          context: { arguments: { [key]: 1 } },
        },
      },
      '2025-11-25',
    );
    expect(problem?.path.length).toBeLessThan(120);
    expect(problem?.path).toMatch(/^\$\.params\.context\.arguments\["k{64}…"\]$/);
  });
});

describe('the modern era (2026-07-28)', () => {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'probe', version: '1.0.0' },
  };
  const request = (method: string, params: Record<string, unknown> = {}, id: number | string = 1) => ({
    jsonrpc: '2.0',
    id,
    method,
    params: { ...params, _meta: meta },
  });

  it('is vendored beside the legacy versions, and answered first in the supported list', () => {
    expect([...modernVersions]).toEqual(['2026-07-28']);
    expect(supportedVersions[0]).toBe('2026-07-28');
    expect(supportedVersions).toContain('2025-11-25');
  });

  it('checks each modern request against the 2026-07-28 schema: its _meta is required', () => {
    expect(protocol.check(request('tools/call', { name: 'echo', arguments: { a: 1 } }), '2026-07-28')).toBeUndefined();
    expect(protocol.check(request('server/discover'), '2026-07-28')).toBeUndefined();
    expect(
      protocol.check(request('subscriptions/listen', { notifications: { toolsListChanged: true } }), '2026-07-28'),
    ).toBeUndefined();
    expect(protocol.check({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, '2026-07-28')).toMatchObject({
      code: -32602,
      path: '$.params._meta',
      message: 'is required',
      schemaVersion: '2026-07-28',
    });
    const noCapabilities = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { ...meta } } };
    delete (noCapabilities.params._meta as Record<string, unknown>)['io.modelcontextprotocol/clientCapabilities'];
    expect(protocol.check(noCapabilities, '2026-07-28')).toMatchObject({
      path: '$.params._meta["io.modelcontextprotocol/clientCapabilities"]',
    });
    expect(protocol.check(request('tools/call', { name: ['echo'] }), '2026-07-28')).toMatchObject({
      code: -32602,
      path: '$.params.name',
    });
    // The proxy's bounds hold in both eras.
    expect(protocol.check(request('tools/call', { name: 'x'.repeat(129) }), '2026-07-28')).toMatchObject({
      path: '$.params.name',
      message: 'must NOT have more than 128 characters',
    });
  });

  it('a legacy method in a modern request is method-not-found, never checked as legacy', () => {
    for (const method of ['initialize', 'ping', 'resources/subscribe', 'logging/setLevel', 'tasks/get']) {
      expect(protocol.check(request(method), '2026-07-28')).toMatchObject({ missing: true, path: '$.method' });
    }
    // And a modern definition never checks a legacy session's message (server/discover needs no _meta there).
    expect(protocol.check({ jsonrpc: '2.0', id: 1, method: 'server/discover' }, '2025-11-25')).toBeUndefined();
  });
});

describe('modern request headers (Mcp-Method, Mcp-Name, MCP-Protocol-Version)', () => {
  const rpc = (method: string, params: Record<string, unknown>) =>
    ({ jsonrpc: '2.0', id: 1, method, params }) as unknown as JsonRpcRequest;
  const headers = (h: Record<string, string>) => ({ get: (name: string) => h[name] ?? '' });
  const full = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' };
  const code = (r: unknown) => (r instanceof GatewayError ? r.rpcCode : r);

  it('match the body: passes; any difference, or a missing one, is -32020', () => {
    const call = rpc('tools/call', { name: 'echo' });
    expect(checkModern(call, '2026-07-28', headers(full), true)).toBe('2026-07-28');
    expect(code(checkModern(call, '2026-07-28', headers({ ...full, 'mcp-name': 'get-env' }), true))).toBe(-32020);
    expect(code(checkModern(call, '2026-07-28', headers({ ...full, 'mcp-method': 'tools/list' }), true))).toBe(-32020);
    expect(
      code(checkModern(call, '2026-07-28', headers({ ...full, 'mcp-protocol-version': '2025-11-25' }), true)),
    ).toBe(-32020);
    for (const name of Object.keys(full)) {
      const without: Record<string, string> = { ...full };
      delete without[name];
      expect(code(checkModern(call, '2026-07-28', headers(without), true)), name).toBe(-32020);
      // Not required (a route that is no MCP endpoint): absent is fine, present must still match.
      expect(checkModern(call, '2026-07-28', headers(without), false)).toBe('2026-07-28');
    }
    // A header that differs from the body is a mismatch before the version is looked at.
    expect(code(checkModern(call, '2099-01-01', headers(full), true))).toBe(-32020);
  });

  it('Mcp-Name in the Base64 sentinel is decoded before it is compared; a broken one never matches', () => {
    const uri = 'file:///tmp/héllo wörld.txt';
    const read = rpc('resources/read', { uri });
    const encoded = `=?base64?${Buffer.from(uri).toString('base64')}?=`;
    const h = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'resources/read' };
    expect(checkModern(read, '2026-07-28', headers({ ...h, 'mcp-name': encoded }), true)).toBe('2026-07-28');
    expect(decodeHeaderValue('=?base64?not base64!?=')).toBeUndefined();
    expect(decodeHeaderValue('=?base64?/w==?=')).toBeUndefined(); // not UTF-8
    expect(decodeHeaderValue('plain')).toBe('plain');
  });

  it('an unsupported version is -32022 with the supported list and the version asked', () => {
    const err = checkModern(rpc('tools/list', {}), '2099-01-01', headers({}), false) as GatewayError;
    expect(err.rpcCode).toBe(-32022);
    expect(err.details).toMatchObject({ requested: '2099-01-01', supported: [...supportedVersions] });
    expect(metaVersionOf(rpc('tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': 'x' } }))).toBe('x');
    expect(metaVersionOf(rpc('tools/list', {}))).toBeUndefined();
  });
});
