/**
 * The JSON-RPC / MCP envelope reader (runtime/wire/jsonrpc.ts): responses told from requests, a
 * `tools/call`'s name and arguments, and the payload an SType describes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonrpcWire } from '../../runtime/index.ts';

const { isRpcResponse, messagePayload, toolCallOf } = jsonrpcWire;

describe('isRpcResponse', () => {
  it('a response has an id and a result or an error, and no method', () => {
    expect(isRpcResponse({ jsonrpc: '2.0', id: 1, result: {} })).toBe(true);
    expect(isRpcResponse({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'x' } })).toBe(true);
    expect(isRpcResponse({ jsonrpc: '2.0', id: 1, result: null })).toBe(true);
  });

  it('requests, notifications and other values are not responses', () => {
    expect(isRpcResponse({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBe(false);
    expect(isRpcResponse({ jsonrpc: '2.0', id: 1, method: 'x', result: {} })).toBe(false);
    expect(isRpcResponse({ jsonrpc: '2.0', result: {} })).toBe(false);
    expect(isRpcResponse({ jsonrpc: '2.0', id: 1 })).toBe(false);
    expect(isRpcResponse([{ jsonrpc: '2.0', id: 1, result: {} }])).toBe(false);
    expect(isRpcResponse(null)).toBe(false);
    expect(isRpcResponse('{"id":1,"result":{}}')).toBe(false);
  });

  it('property: total on any JSON value, and true exactly for objects with id, result|error and no method', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const expected =
          typeof v === 'object' &&
          v !== null &&
          !Array.isArray(v) &&
          'id' in v &&
          ('result' in v || 'error' in v) &&
          !('method' in v);
        expect(isRpcResponse(v)).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });
});

describe('toolCallOf', () => {
  it('the name and arguments of a tools/call', () => {
    expect(toolCallOf({ method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } })).toEqual({
      name: 'echo',
      arguments: { message: 'hi' },
    });
  });

  it('absent arguments are {}; a missing or non-string name is null', () => {
    expect(toolCallOf({ method: 'tools/call', params: { name: 'echo' } })).toEqual({ name: 'echo', arguments: {} });
    expect(toolCallOf({ method: 'tools/call', params: { arguments: { a: 1 } } })).toEqual({
      name: null,
      arguments: { a: 1 },
    });
    expect(toolCallOf({ method: 'tools/call', params: { name: 7 } })).toEqual({ name: null, arguments: {} });
    expect(toolCallOf({ method: 'tools/call' })).toEqual({ name: null, arguments: {} });
    expect(toolCallOf({ method: 'tools/call', params: ['echo'] })).toEqual({ name: null, arguments: {} });
  });

  it('arguments that are not an object are handed back as they are (validation decides)', () => {
    expect(toolCallOf({ method: 'tools/call', params: { name: 'echo', arguments: 'text' } })?.arguments).toBe('text');
  });

  it('any other method is no tool call', () => {
    expect(toolCallOf({ method: 'tools/list', params: { name: 'echo' } })).toBeUndefined();
    expect(toolCallOf({ method: 'Tools/Call', params: { name: 'echo' } })).toBeUndefined();
  });
});

describe('messagePayload', () => {
  it('a tools/call: its arguments, under $.arguments', () => {
    expect(messagePayload({ method: 'tools/call', params: { name: 'e', arguments: { m: 1 } } })).toEqual({
      payload: { m: 1 },
      root: '$.arguments',
    });
    expect(messagePayload({ method: 'tools/call', params: { name: 'e' } })).toEqual({
      payload: {},
      root: '$.arguments',
    });
  });

  it('any other method: its params (or {}), under $', () => {
    expect(messagePayload({ method: 'resources/read', params: { uri: 'file:///a' } })).toEqual({
      payload: { uri: 'file:///a' },
      root: '$',
    });
    expect(messagePayload({ method: 'ping' })).toEqual({ payload: {}, root: '$' });
    expect(messagePayload({ method: 'sum', params: [1, 2] })).toEqual({ payload: [1, 2], root: '$' });
  });
});

describe('what a model reads in a response and a tool definition', () => {
  const { maskResponse, responseText, toolDefinitionText } = jsonrpcWire;

  it('reads content text of any type, embedded resources, structuredContent strings and an error', () => {
    const response = {
      jsonrpc: '2.0',
      id: 1,
      result: {
        content: [
          { type: 'TEXT', text: 'a' },
          { type: 'resource', resource: { uri: 'file:///x', text: 'b' } },
          { type: 'image', data: 'AAAA' },
        ],
        structuredContent: { deep: [{ note: 'c' }], n: 3 },
      },
    };
    expect(responseText(response)).toBe('a\nb\nc');
    expect(responseText({ jsonrpc: '2.0', id: 1, error: { code: 1, message: 'd', data: { why: 'e' } } })).toBe('d\ne');
  });

  it('masks a copy, field by field; the same object when nothing changes', async () => {
    const response = {
      jsonrpc: '2.0',
      id: 1,
      result: { content: [{ type: 'text', text: 'x SECRET y' }], structuredContent: { s: 'SECRET' } },
    };
    const masked = await maskResponse(response, (t) => t.replaceAll('SECRET', '[M]'));
    expect(masked).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: { content: [{ type: 'text', text: 'x [M] y' }], structuredContent: { s: '[M]' } },
    });
    expect(response.result.structuredContent.s).toBe('SECRET');
    expect(await maskResponse(response, (t) => t)).toBe(response);
  });

  it('a tool definition: name, title, description and every string and property name of its schemas', () => {
    const text = toolDefinitionText({
      name: 'n',
      title: 't',
      description: 'd',
      annotations: { title: 'a' },
      inputSchema: { type: 'object', properties: { city: { description: 'p', enum: ['e'] } } },
      outputSchema: { description: 'o' },
    });
    for (const part of ['n', 't', 'd', 'a', 'city', 'p', 'e', 'o']) expect(text.split('\n')).toContain(part);
  });

  it('JSON beyond the walk bound is still read, as its JSON text', () => {
    let deep: Record<string, unknown> = { description: 'HIDDEN' };
    for (let i = 0; i < 40; i++) deep = { nested: deep };
    expect(toolDefinitionText({ name: 'n', inputSchema: deep })).toContain('HIDDEN');
    expect(responseText({ jsonrpc: '2.0', id: 1, result: { structuredContent: deep } })).toContain('HIDDEN');
  });
});
