/**
 * The HTTP headers by which an MCP 2026-07-28 request mirrors its body (`Mcp-Method`, `Mcp-Name`),
 * read and written in one place: by the gateway checking a client's headers against the body
 * (mcp-validate), by the proxy mapping a 2025 client onto a 2026-only upstream, and by the runtime's
 * own calls of such an upstream (rpc-over-http).
 */

/** Methods whose `Mcp-Name` header mirrors a body field, and which field. */
export const mcpNameSources: Readonly<Record<string, 'name' | 'uri'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

/** The body value a request's `Mcp-Name` header must mirror (undefined: the method has none, or the field is no string). */
export function mcpNameOf(method: string, params: unknown): string | undefined {
  const source = mcpNameSources[method];
  if (!source || params === null || typeof params !== 'object') return undefined;
  const value = (params as Record<string, unknown>)[source];
  return typeof value === 'string' ? value : undefined;
}

/** A value as a header carries it: as it is when plain visible ASCII, else the Base64 sentinel. */
export function encodeMcpHeaderValue(value: string): string {
  return /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value) && !value.startsWith('=?base64?')
    ? value
    : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/**
 * A header value as the client meant it: the Base64 sentinel (`=?base64?…?=`) decoded from UTF-8;
 * undefined when the sentinel holds no valid Base64 (never equal to a body value).
 */
export function decodeMcpHeaderValue(value: string): string | undefined {
  if (!(value.startsWith('=?base64?') && value.endsWith('?=') && value.length >= 11)) return value;
  const b64 = value.slice(9, -2);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) return undefined;
  const text = Buffer.from(b64, 'base64').toString('utf8');
  // Not UTF-8: U+FFFD stands for the bad bytes; a name that really holds one cannot be told apart.
  return text.includes('\uFFFD') ? undefined : text;
}
