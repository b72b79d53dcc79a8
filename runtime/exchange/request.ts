/**
 * The request view of the exchange: what goes upstream. A stage that changes the request says so
 * here, and the terminal stage (the `proxy`) sends what the view holds:
 *
 * - headers: a header a stage sets goes upstream as set, without the operator listing it in the
 *   proxy's `forward_headers` (that list is for the client's headers); one it removes is not
 *   forwarded even when listed. Connection-level names (hop-by-hop, `host`, `content-length`)
 *   are the runtime's and refused.
 * - body: `setJson` / `setRpc` replace it (the value may be the one read, changed in place); the
 *   body goes upstream re-serialised from the last one set, else as the client sent it.
 *
 * The view is made on first use (`requestOf(ctx)`), so a request no stage changes costs nothing.
 * The older flags (`ctx.state.jsonModified`, `rpcModified`) still count, read through `bodyChange`.
 */
import type { GatewayContext, JsonRpcRequest } from '../state.ts';

/** RFC 9110 §7.6.1 connection-specific headers: never forwarded in either direction by a proxy. */
export const hopByHopHeaders: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Names a stage may not set on the upstream request: the connection's, not the request's. */
const connectionHeaders = new Set([...hopByHopHeaders, 'host', 'content-length']);
const tokenPattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const unsafeValue = /[\r\n\0]/;

/** What replaced the request body: the parsed JSON, or the JSON-RPC message. */
export type BodyChange = 'json' | 'rpc';

export class UpstreamRequest {
  /** Headers stages set (a value) or removed (undefined), by lower-case name, in order. */
  #headers: Map<string, string | undefined> | undefined;
  #body: BodyChange | undefined;

  constructor(private readonly ctx: GatewayContext) {}

  /** Sends `name: value` upstream (replacing what the client sent under that name). */
  setHeader(name: string, value: string | number): void {
    const key = checkedName(name);
    const text = String(value);
    if (unsafeValue.test(text)) throw new Error(`header ${name}: a value may not contain CR, LF or NUL`);
    this.#headers ??= new Map();
    this.#headers.set(key, text);
  }

  /** Keeps the client's `name` from going upstream, even when the route forwards it. */
  removeHeader(name: string): void {
    this.#headers ??= new Map();
    this.#headers.set(checkedName(name), undefined);
  }

  /** The value going upstream under `name` as far as stages decided: set, removed, else the client's. */
  header(name: string): string | undefined {
    const key = name.toLowerCase();
    if (this.#headers?.has(key)) return this.#headers.get(key);
    const value = this.ctx.req.headers[key];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  /** The headers stages set (value) or removed (undefined); undefined when none did. */
  get headerChanges(): ReadonlyMap<string, string | undefined> | undefined {
    return this.#headers;
  }

  /** Replaces the body with a JSON value (the parsed body changed in place included): re-serialised upstream. */
  setJson(value: unknown): void {
    this.ctx.state.json = value;
    this.#body = 'json';
  }

  /** Replaces the body with a JSON-RPC message (re-serialised upstream). */
  setRpc(message: JsonRpcRequest): void {
    this.ctx.state.rpc = message;
    this.#body = 'rpc';
  }

  /** What replaced the body, if anything did (the older `jsonModified` / `rpcModified` flags count too). */
  get bodyChange(): BodyChange | undefined {
    return this.#body ?? legacyBodyChange(this.ctx);
  }
}

/** The request view of this request's exchange, made on first use. */
export function requestOf(ctx: GatewayContext): UpstreamRequest {
  let view = ctx.state.request;
  if (!view) {
    view = new UpstreamRequest(ctx);
    ctx.state.request = view;
  }
  return view;
}

/** What replaced the request body, without making a view when no stage made one. */
export function bodyChangeOf(ctx: GatewayContext): BodyChange | undefined {
  return ctx.state.request ? ctx.state.request.bodyChange : legacyBodyChange(ctx);
}

/** The body that goes upstream when a stage replaced it (undefined: the client's, as sent). */
export function replacedBody(ctx: GatewayContext): string | undefined {
  const change = bodyChangeOf(ctx);
  if (change === 'rpc') return JSON.stringify(ctx.state.rpc);
  if (change === 'json') return JSON.stringify(ctx.state.json);
  return undefined;
}

function legacyBodyChange(ctx: GatewayContext): BodyChange | undefined {
  const s = ctx.state;
  if (s.rpcModified && s.rpc) return 'rpc';
  if (s.jsonModified && s.json !== undefined) return 'json';
  return undefined;
}

function checkedName(name: string): string {
  const key = name.toLowerCase();
  if (!tokenPattern.test(name)) throw new Error(`"${name}" is not a header name`);
  if (connectionHeaders.has(key)) {
    throw new Error(`header ${name} belongs to the connection, not the request`);
  }
  return key;
}
