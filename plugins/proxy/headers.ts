/**
 * Which headers cross the proxy. Upstream requests get an allow-list of the client's headers
 * (content negotiation, MCP session and request-metadata headers, and what the route names in
 * `forward_headers`), then what stages set or removed on the request view (`requestOf(ctx)`), then
 * the gateway's own (trace context, request id, X-Forwarded-*); the client's credentials are never
 * passed unless listed, and answers are asked for uncompressed. Responses
 * keep everything but hop-by-hop headers.
 */
import { type GatewayContext, hopByHopHeaders } from '../../runtime/index.ts';

const defaultRequestHeaders = [
  'content-type',
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  // MCP 2026-07-28: the method and name mirrored from the body (checked against it by mcp-validate).
  'mcp-method',
  'mcp-name',
  'last-event-id',
];
/** MCP 2026-07-28 `Mcp-Param-{Name}` headers (a tool's parameters mirrored): an intermediary MUST forward them. */
const mcpParamPrefix = 'mcp-param-';

const hopByHop = hopByHopHeaders;

/** Response headers the gateway sets itself. */
const ownResponseHeaders = new Set(['x-request-id', 'date']);

export function requestHeaderNames(forwardHeaders: string[] = []): string[] {
  const names = new Set([...defaultRequestHeaders, ...forwardHeaders.map((h) => h.toLowerCase())]);
  for (const h of hopByHop) names.delete(h);
  names.delete('host');
  names.delete('content-length');
  return [...names];
}

export function upstreamRequestHeaders(
  ctx: GatewayContext,
  names: string[],
  bodyReplaced: boolean,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name of names) {
    const value = ctx.req.headers[name];
    if (value !== undefined) out[name] = value;
  }
  for (const name in ctx.req.headers) {
    if (name.startsWith(mcpParamPrefix)) out[name] = ctx.req.headers[name] as string | string[];
  }
  // What stages set or removed on the request view goes as they left it, listed or not.
  const changes = ctx.state.request?.headerChanges;
  if (changes) {
    for (const [name, value] of changes) {
      if (value === undefined) delete out[name];
      else out[name] = value;
    }
  }
  if (bodyReplaced) out['content-type'] = 'application/json';
  // Answers are checked as they come: ask for them uncompressed unless the route forwards the
  // client's choice (a compressed answer is still decoded before any stage reads it).
  out['accept-encoding'] ??= 'identity';
  if (ctx.state.traceparent) out.traceparent = ctx.state.traceparent;
  if (ctx.state.requestId) out['x-request-id'] = ctx.state.requestId;
  const prior = ctx.req.headers['x-forwarded-for'];
  const { ip, protocol, host } = clientOf(ctx);
  out['x-forwarded-for'] = prior ? `${prior}, ${ip}` : ip;
  out['x-forwarded-proto'] = protocol;
  if (host) out['x-forwarded-host'] = host;
  return out;
}

/**
 * The client's address, protocol and host as Koa's `ctx.ip`, `ctx.protocol` and `ctx.host` give
 * them, read from the socket and the Host header directly in the common case (no trusted proxy,
 * HTTP/1, a plain Host): Koa's getters cost several property lookups and a split each, per request.
 * Anything else (trust_proxy, HTTP/2, a list or userinfo in Host) takes Koa's getters.
 */
function clientOf(ctx: GatewayContext): { ip: string; protocol: string; host: string } {
  const req = ctx.req;
  const socket = req.socket as (typeof req.socket & { encrypted?: boolean }) | undefined;
  const host = req.headers.host;
  if (
    ctx.app?.proxy === false &&
    socket &&
    req.httpVersionMajor < 2 &&
    (host === undefined || (!host.includes(',') && !host.includes('@') && host.trim() === host))
  ) {
    return {
      ip: socket.remoteAddress || '',
      protocol: socket.encrypted ? 'https' : 'http',
      host: host ?? '',
    };
  }
  return { ip: ctx.ip, protocol: ctx.protocol, host: ctx.host };
}

/** The upstream's response headers minus hop-by-hop ones and those the gateway sets itself. */
export function upstreamResponseHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string | string[] | undefined> {
  // Headers the upstream's Connection header names are hop-by-hop too (rare: parsed only then).
  const connection =
    headers.connection === undefined
      ? undefined
      : String(headers.connection)
          .toLowerCase()
          .split(',')
          .map((s) => s.trim());
  const out: Record<string, string | string[] | undefined> = {};
  for (const name in headers) {
    const value = headers[name];
    // undici gives lower-case names; other callers may not.
    const key = name.toLowerCase();
    if (value === undefined || hopByHop.has(key) || ownResponseHeaders.has(key) || connection?.includes(key)) continue;
    out[key] = value;
  }
  return out;
}
