/**
 * The modern MCP era (2026-07-28): no session, every request says its protocol version in
 * `params._meta["io.modelcontextprotocol/protocolVersion"]`, and on HTTP mirrors it and the
 * method (and, for tools/call, resources/read and prompts/get, the name or URI) in the
 * `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers. A gateway that decides on a header
 * (a policy on `Mcp-Name`, a load balancer routing on `Mcp-Method`) and a server that executes the
 * body must see the same thing: a header that is missing or differs from the body is refused
 * (400, -32020 HeaderMismatch) before anything else sees the request, as the transport requires.
 * So are a tools/call's `Mcp-Param-{Name}` headers (SEP-2243: the tool's parameters annotated
 * `x-mcp-header` in its inputSchema, mirrored by the client), against the arguments, using the
 * annotations of the tool as the gateway last saw it listed.
 */
import { decodeMcpHeaderValue, GatewayError, type JsonRpcRequest, mcpNameSources } from '../../runtime/index.ts';
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
  const source = mcpNameSources[rpc.method];
  if (source) {
    const shown = headers.get('mcp-name');
    const value = (rpc.params as Record<string, unknown> | undefined)?.[source];
    const decoded = decodeMcpHeaderValue(shown);
    if (shown === '' ? require && request : decoded !== value) return mismatch('Mcp-Name', shown, value);
  }
  return asked;
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

/** A tool parameter mirrored into an `Mcp-Param-{header}` header (its `x-mcp-header` annotation). */
export interface ParamHeader {
  /** The header's name after `Mcp-Param-`, lower case. */
  header: string;
  /** The property names from `arguments` down to the parameter. */
  path: string[];
}

/** RFC 9110 token (tchar+). */
const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Properties walked for annotations at most (a schema is bounded by schema-validate too). */
const maxWalked = 10_000;

/**
 * The `x-mcp-header` annotations of a tool's inputSchema (any nesting depth of `properties`), or
 * why they break the revision's rules: a value that is empty or not an HTTP token, names equal
 * but for case, or an annotated parameter whose type is not a primitive (string, integer,
 * boolean; number is taken too, as servers in use annotate it).
 */
export function paramHeadersOf(inputSchema: unknown): ParamHeader[] | { invalid: string } {
  const out: ParamHeader[] = [];
  const seen = new Set<string>();
  let walked = 0;
  const walk = (schema: unknown, path: string[]): string | undefined => {
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return undefined;
    const properties = (schema as Record<string, unknown>).properties;
    if (properties === null || typeof properties !== 'object' || Array.isArray(properties)) return undefined;
    for (const [name, sub] of Object.entries(properties as Record<string, unknown>)) {
      if (++walked > maxWalked) return 'too many properties to read its x-mcp-header annotations';
      if (sub === null || typeof sub !== 'object' || Array.isArray(sub)) continue;
      const s = sub as Record<string, unknown>;
      const at = [...path, name];
      if ('x-mcp-header' in s) {
        const header = s['x-mcp-header'];
        if (typeof header !== 'string' || !token.test(header)) {
          return `x-mcp-header of ${at.join('.')} is not an HTTP token`;
        }
        const lower = header.toLowerCase();
        if (seen.has(lower)) return `x-mcp-header ${header} is not unique`;
        // number too: the revision names integer, but published servers annotate numbers (compared as numbers).
        if (!['string', 'integer', 'number', 'boolean'].includes(s.type as string)) {
          return `x-mcp-header of ${at.join('.')} is on a parameter that is not a string, integer or boolean`;
        }
        seen.add(lower);
        out.push({ header: lower, path: at });
      }
      const inner = walk(s, at);
      if (inner) return inner;
    }
    return undefined;
  };
  const invalid = walk(inputSchema, []);
  return invalid ? { invalid } : out;
}

/**
 * The `Mcp-Param-*` headers of a modern tools/call against its arguments (-32020 on a mismatch):
 * a parameter present (not null) must be mirrored with its value, an absent one must not be,
 * and a header the tool's annotations do not declare cannot be matched to the body. `known`
 * undefined: the gateway has not seen the tool listed, so any such header is a mismatch (the
 * client lists tools again, as the revision says a client with a stale definition does).
 */
export function checkParamHeaders(
  rpc: JsonRpcRequest,
  headers: Record<string, string | string[] | undefined>,
  known: ParamHeader[] | { invalid: string } | undefined,
): GatewayError | undefined {
  const sent = Object.keys(headers).filter((h) => h.startsWith('mcp-param-'));
  const declared = Array.isArray(known) ? known : [];
  if (!Array.isArray(known) && sent.length > 0) {
    const why = known ? known.invalid : 'the tool is not known to the gateway: list the tools again';
    return new GatewayError('bad_request', `Header mismatch: ${shownValue(sent[0])} cannot be checked (${why})`, {
      code: 'header_mismatch',
      rpcCode: -32020,
      details: { header: sent[0] },
    });
  }
  const args = (rpc.params as Record<string, unknown> | undefined)?.arguments;
  const names = new Set(declared.map((d) => `mcp-param-${d.header}`));
  const undeclared = sent.find((h) => !names.has(h));
  if (undeclared) return mismatch(`Mcp-Param-${undeclared.slice(10)}`, headerText(headers[undeclared]), undefined);
  for (const { header, path } of declared) {
    let value: unknown = args;
    for (const key of path)
      value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
    const name = `mcp-param-${header}`;
    const shown = headerText(headers[name]);
    const present = headers[name] !== undefined;
    if (value === undefined || value === null) {
      if (present) return mismatch(`Mcp-Param-${header}`, shown, value ?? '(none)');
      continue;
    }
    if (!present) return mismatch(`Mcp-Param-${header}`, '', value);
    const decoded = decodeMcpHeaderValue(shown);
    const same =
      typeof value === 'number'
        ? decoded !== undefined && decoded.trim() !== '' && Number(decoded) === value
        : decoded === String(value);
    if (!same) return mismatch(`Mcp-Param-${header}`, shown, value);
  }
  return undefined;
}

function headerText(v: string | string[] | undefined): string {
  return Array.isArray(v) ? v.join(', ') : (v ?? '');
}
