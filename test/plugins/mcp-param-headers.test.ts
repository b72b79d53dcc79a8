/**
 * MCP 2026-07-28 custom headers (SEP-2243): a tool's `x-mcp-header` parameters are mirrored by the
 * client into `Mcp-Param-{Name}` headers, which an intermediary may route or decide on; the gateway
 * refuses (-32020) a header that says something else than the arguments, one for an absent
 * argument, a missing one for a present argument, and one the tool does not declare.
 */
import { describe, expect, it } from 'vitest';
import { checkParamHeaders, paramHeadersOf } from '../../plugins/mcp-validate/modern.ts';
import { GatewayError, type JsonRpcRequest } from '../../runtime/index.ts';

const schema = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    limit: { type: 'integer', 'x-mcp-header': 'Limit' },
    dry: { type: 'boolean', 'x-mcp-header': 'Dry-Run' },
    target: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant' } } },
    note: { type: 'string' },
  },
};

function call(args: Record<string, unknown>): JsonRpcRequest {
  return { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 't', arguments: args } };
}

describe('x-mcp-header annotations', () => {
  it('are read at any depth, lower-cased', () => {
    expect(paramHeadersOf(schema)).toEqual([
      { header: 'region', path: ['region'] },
      { header: 'limit', path: ['limit'] },
      { header: 'dry-run', path: ['dry'] },
      { header: 'tenant', path: ['target', 'tenant'] },
    ]);
  });

  it('that break the rules make the definition invalid, with the reason', () => {
    const bad = (property: Record<string, unknown>, other: Record<string, unknown> = {}) =>
      paramHeadersOf({ type: 'object', properties: { a: property, ...other } });
    expect(bad({ type: 'string', 'x-mcp-header': '' })).toMatchObject({ invalid: expect.stringContaining('token') });
    expect(bad({ type: 'string', 'x-mcp-header': 'A\r\nX-Evil: 1' })).toMatchObject({
      invalid: expect.stringContaining('token'),
    });
    expect(bad({ type: 'string', 'x-mcp-header': 'Has Space' })).toMatchObject({ invalid: expect.any(String) });
    expect(bad({ type: 'array', 'x-mcp-header': 'N' })).toMatchObject({ invalid: expect.stringContaining('integer') });
    expect(bad({ type: 'object', 'x-mcp-header': 'O' })).toMatchObject({ invalid: expect.any(String) });
    expect(
      bad({ type: 'string', 'x-mcp-header': 'Same' }, { b: { type: 'string', 'x-mcp-header': 'same' } }),
    ).toMatchObject({
      invalid: expect.stringContaining('unique'),
    });
  });
});

describe('Mcp-Param-* headers against the arguments', () => {
  const known = paramHeadersOf(schema);
  const check = (args: Record<string, unknown>, headers: Record<string, string>) =>
    checkParamHeaders(call(args), headers, known);

  it('pass when each present argument is mirrored (Base64 sentinel decoded, integers compared as numbers)', () => {
    expect(
      check(
        { region: 'eu-west', limit: 10, dry: true, target: { tenant: 'Zoë' }, note: 'x' },
        {
          'mcp-param-region': 'eu-west',
          'mcp-param-limit': '10',
          'mcp-param-dry-run': 'true',
          'mcp-param-tenant': `=?base64?${Buffer.from('Zoë').toString('base64')}?=`,
        },
      ),
    ).toBeUndefined();
    // Absent and null arguments carry no header.
    expect(check({ region: 'eu', limit: null }, { 'mcp-param-region': 'eu' })).toBeUndefined();
  });

  it('are -32020 when they differ, are missing, name an absent argument or are not declared', () => {
    const cases: Array<[Record<string, unknown>, Record<string, string>, string]> = [
      [{ region: 'eu-west' }, { 'mcp-param-region': 'us-east' }, 'Mcp-Param-region'],
      [{ region: 'eu-west' }, {}, 'Mcp-Param-region'],
      [{}, { 'mcp-param-region': 'eu-west' }, 'Mcp-Param-region'],
      [{ limit: 10 }, { 'mcp-param-limit': '11' }, 'Mcp-Param-limit'],
      [{ dry: false }, { 'mcp-param-dry-run': 'true' }, 'Mcp-Param-dry-run'],
      [{}, { 'mcp-param-shard': '1' }, 'Mcp-Param-shard'],
      [{ region: 'eu' }, { 'mcp-param-region': '=?base64?not base64?=' }, 'Mcp-Param-region'],
    ];
    for (const [args, headers, header] of cases) {
      const err = check(args, headers);
      expect(err, JSON.stringify([args, headers])).toBeInstanceOf(GatewayError);
      expect(err).toMatchObject({ rpcCode: -32020, details: { header } });
    }
  });

  it('of a tool the gateway has not seen listed, or whose annotations are invalid, cannot be checked: -32020', () => {
    const unknown = checkParamHeaders(call({ region: 'eu' }), { 'mcp-param-region': 'eu' }, undefined);
    expect(unknown).toMatchObject({ rpcCode: -32020, message: expect.stringContaining('list the tools again') });
    expect(checkParamHeaders(call({}), {}, undefined)).toBeUndefined();
    const invalid = checkParamHeaders(call({ a: 1 }), { 'mcp-param-a': '1' }, { invalid: 'x-mcp-header of a is bad' });
    expect(invalid).toMatchObject({ rpcCode: -32020, message: expect.stringContaining('x-mcp-header of a is bad') });
  });
});
