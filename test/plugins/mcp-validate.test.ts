/**
 * The MCP protocol check of the mcp-validate stage (plugins/mcp-validate/protocol.ts) against
 * every vendored protocol version: each malformed message is refused with the JSON path of what
 * is wrong, each valid one passes, methods no version defines are left alone. Messages go through
 * JSON text first, as the proxy reads them (1e400 is Infinity once parsed).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { McpProtocol, protocolVersions } from '../../plugins/mcp-validate/protocol.ts';
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
