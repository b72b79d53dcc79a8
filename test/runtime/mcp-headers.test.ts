/**
 * The Mcp-Name header codec (runtime/wire/mcp-headers.ts): a name that is not plain visible ASCII
 * (CR/LF that would split a header, non-ASCII, edge spaces, the sentinel itself) goes Base64, and
 * decoding gives back exactly the name.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeMcpHeaderValue, encodeMcpHeaderValue, mcpNameOf } from '../../runtime/index.ts';

describe('Mcp-Name header codec', () => {
  it('never puts a control character or non-ASCII in the header, and round-trips every name', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 64 }), (name) => {
        const header = encodeMcpHeaderValue(name);
        expect(header).toMatch(/^[\x20-\x7e]*$/);
        expect(decodeMcpHeaderValue(header)).toBe(name);
      }),
    );
    expect(encodeMcpHeaderValue('evil\r\nX-Injected: 1')).toMatch(/^=\?base64\?[A-Za-z0-9+/=]+\?=$/);
    expect(encodeMcpHeaderValue('get-sum')).toBe('get-sum');
  });

  it('reads the name of the methods that mirror one, and only those', () => {
    expect(mcpNameOf('tools/call', { name: 'echo' })).toBe('echo');
    expect(mcpNameOf('resources/read', { uri: 'demo://x' })).toBe('demo://x');
    expect(mcpNameOf('tools/list', { name: 'echo' })).toBeUndefined();
    expect(mcpNameOf('tools/call', { name: 5 })).toBeUndefined();
  });
});
