/**
 * The modern MCP era (2026-07-28): no session, every request says its protocol version in
 * `params._meta["io.modelcontextprotocol/protocolVersion"]`, and on HTTP mirrors it and the
 * method (and, for tools/call, resources/read and prompts/get, the name or URI) in the
 * `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers. A gateway that decides on a header
 * (a policy on `Mcp-Name`, a load balancer routing on `Mcp-Method`) and a server that executes the
 * body must see the same thing: a header that is missing or differs from the body is refused
 * (400, -32020 HeaderMismatch) before anything else sees the request, as the transport requires.
 */
import { GatewayError, type JsonRpcRequest } from '../../runtime/index.ts';
import { isModernVersion, type ModernVersion, supportedVersions } from './protocol.ts';

export const versionKey = 'io.modelcontextprotocol/protocolVersion';

/** The version a request's `_meta` names (any value), undefined when it names none (a legacy message). */
export function metaVersionOf(rpc: JsonRpcRequest): unknown {
  const params = rpc.params;
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return undefined;
  const meta = (params as Record<string, unknown>)._meta;
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) return undefined;
  return (meta as Record<string, unknown>)[versionKey];
}

/** Methods whose `Mcp-Name` header mirrors a body field. */
const nameSources: Record<string, 'name' | 'uri'> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

export interface HeaderView {
  get(name: string): string;
}

/**
 * The modern version of a request, or the refusal: -32022 when the version is not one the
 * gateway speaks, -32020 when a header is missing (`require`) or says something else than the body.
 */
export function checkModern(
  rpc: JsonRpcRequest,
  asked: unknown,
  headers: HeaderView,
  require: boolean,
): ModernVersion | GatewayError {
  // Notifications carry no mirrored headers in this revision (only notifications/cancelled, on stdio).
  const request = rpc.id !== undefined;
  const header = headers.get('mcp-protocol-version');
  // A header that is not the body's is a mismatch first, whichever of the two is unsupported.
  if (header === '' ? require && request : header !== asked) {
    return mismatch('MCP-Protocol-Version', header, asked);
  }
  if (!isModernVersion(asked)) return unsupportedVersion(asked);
  const method = headers.get('mcp-method');
  if (method === '' ? require && request : method !== rpc.method) return mismatch('Mcp-Method', method, rpc.method);
  // Mcp-Name of the core methods; an extension's (tasks/get…) is the extension's to check.
  const source = nameSources[rpc.method];
  if (source) {
    const shown = headers.get('mcp-name');
    const value = (rpc.params as Record<string, unknown> | undefined)?.[source];
    const decoded = decodeHeaderValue(shown);
    if (shown === '' ? require && request : decoded !== value) return mismatch('Mcp-Name', shown, value);
  }
  return asked;
}

/**
 * A header value as the client meant it: the Base64 sentinel (`=?base64?…?=`) decoded from UTF-8;
 * undefined when the sentinel holds no valid Base64 (never equal to a body value).
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!(value.startsWith('=?base64?') && value.endsWith('?=') && value.length >= 11)) return value;
  const b64 = value.slice(9, -2);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) return undefined;
  const text = Buffer.from(b64, 'base64').toString('utf8');
  // Not UTF-8: U+FFFD stands for the bad bytes; a name that really holds one cannot be told apart.
  return text.includes('\uFFFD') ? undefined : text;
}

/** The longest header or body value echoed in an error: the error never amplifies the request. */
const shownMax = 128;

function shownValue(v: unknown): string {
  const text = typeof v === 'string' ? v : v === undefined ? '(none)' : JSON.stringify(v);
  return text.length > shownMax ? `${text.slice(0, shownMax)}…` : text;
}

function mismatch(header: string, value: string, body: unknown): GatewayError {
  const what =
    value === ''
      ? `Header mismatch: the ${header} header is required`
      : `Header mismatch: ${header} header value ${shownValue(value)} does not match body value ${shownValue(body)}`;
  return new GatewayError('bad_request', what, { code: 'header_mismatch', rpcCode: -32020, details: { header } });
}

/** -32022, with the versions the gateway speaks, as the 2026-07-28 revision defines it (400). */
export function unsupportedVersion(asked: unknown): GatewayError {
  const requested = typeof asked === 'string' ? shownValue(asked) : shownValue(asked ?? null);
  return new GatewayError('bad_request', 'Unsupported protocol version', {
    code: 'unsupported_protocol_version',
    rpcCode: -32022,
    details: { supported: [...supportedVersions], requested },
  });
}
