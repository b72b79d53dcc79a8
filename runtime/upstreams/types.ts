/**
 * Upstream contract. An upstream is a named target declared under `upstreams:`; it is created
 * once per service graph and reused across hot reloads while its config is unchanged (so child
 * processes and connection pools survive a reload).
 */
import type { Readable } from 'node:stream';
import type { RequestTrace } from '../observability/request-trace.ts';
import type { JsonRpcRequest } from '../state.ts';
import type { ClientAbort } from '../util/client-abort.ts';

export interface UpstreamHealth {
  connected: boolean;
  /** Why the upstream is not connected (last error), when it is not. */
  error?: string;
  detail?: Record<string, unknown>;
  /**
   * Client sessions of an upstream that keeps them (stdio MCP servers): live count and cap, the
   * cap of one client (`max_per_client`) and how many clients hold sessions.
   */
  sessions?: { mode: SessionMode; live: number; max: number; max_per_client: number; clients: number };
}

/** `per-client`: one server (child) per client session; `shared`: one for all, ids scoped per client. */
export type SessionMode = 'per-client' | 'shared';

export interface UpstreamBase {
  name: string;
  kind: string;
  health(): UpstreamHealth;
  /** Resolves once the upstream is usable, or rejects after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>;
  /**
   * Resolves once the first check has an outcome, up or down (at most `timeoutMs`): what a start
   * waits for, so that an absent upstream costs one refused connection, not the whole timeout.
   * Without it the start waits for ready().
   */
  checked?(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

export interface HttpForwardRequest {
  method: string;
  /** Path and query appended to the upstream's base path. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body?: Buffer | string | Readable | null;
  /** Cancels the request: an AbortSignal, or the cheaper ClientAbort (see runtime/util/client-abort.ts). */
  signal?: AbortSignal | ClientAbort;
  /** Overrides the upstream's configured response timeout (headers), in ms. */
  timeoutMs?: number;
  /** The request's trace (ctx.state.trace): the call is timed and, when tracing, a client span. */
  trace?: RequestTrace;
}

export interface HttpForwardResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as a stream, so SSE and chunked answers pass through unbuffered. */
  body: Readable;
  /**
   * The whole body, when the answer was small (by Content-Length, at most 64 KiB, not an event
   * stream) and came complete: `body` is then a stream of it made only when read. A caller that
   * reads the answer whole takes this instead. A wrapper of `forward` that changes the body
   * (secret-scrub.ts) changes `whole` too, or leaves it out.
   */
  whole?: Buffer;
  /**
   * The response timeout this request ran under (ms): a caller that reads the body whole bounds
   * the read by it (the upstream's deadline stops at the headers of a streamed answer).
   */
  timeoutMs?: number;
}

/** `http`, `jsonrpc` (JSON-RPC over HTTP) and `openai` upstreams: raw HTTP forwarding. */
export interface HttpUpstream extends UpstreamBase {
  kind: 'http' | 'jsonrpc' | 'openai';
  url: URL;
  /** Throws GatewayError upstream_error (connect failure) / upstream_timeout. */
  forward(req: HttpForwardRequest): Promise<HttpForwardResponse>;
  /**
   * `openai` upstreams with a `model_map` (provider.ts): this provider's name of a client's model,
   * undefined when it keeps the client's name.
   */
  providerModel?(model: string): string | undefined;
}

export interface RpcCallOptions {
  /** Cancels the call: an AbortSignal, or the cheaper ClientAbort (runtime/util/client-abort.ts). */
  signal?: AbortSignal | ClientAbort;
  timeoutMs?: number;
  headers?: Record<string, string>;
  /**
   * The client session (an id from `sessions.open()`) the message belongs to. Without it the
   * message goes to the gateway's own server session, as a sessionless client's.
   */
  session?: string;
  /** The request's trace (ctx.state.trace): the call is timed and, when tracing, a client span. */
  trace?: RequestTrace;
  /**
   * What the server sends while this call is pending that belongs to it (stdio MCP upstreams): its
   * `notifications/progress` (the call's `progressToken`, which the gateway makes unique on the
   * wire and puts back) and, when the call is the only one pending on its child, the server's
   * requests (sampling, elicitation, roots), answered with `respond`. Without it a server request
   * is answered -32601 and progress is dropped.
   */
  onServerMessage?: ServerMessageListener;
}

/** See RpcCallOptions.onServerMessage; `respond` is given for a request (exactly one answer is sent). */
export type ServerMessageListener = (
  message: Record<string, unknown>,
  respond?: (answer: { result: unknown } | { error: { code: number; message: string; data?: unknown } }) => void,
) => void;

/**
 * Who opens an MCP client session. `client` is what its share of the sessions is counted by (the
 * authenticated subject, else the client's address); `subject` is the authenticated identity the
 * session is bound to (absent without authentication: then the session id alone is the key).
 */
export interface SessionOwner {
  client: string;
  subject?: string;
}

/**
 * Client sessions an RPC upstream keeps for the MCP clients of the gateway: the gateway issues
 * the `Mcp-Session-Id` at `initialize` (open), requires it afterwards (has) and ends it on DELETE.
 * A session belongs to the subject that opened it: `has` and `end` with another subject (or none,
 * for a session opened with one) see no such session.
 */
export interface RpcSessions {
  readonly mode: SessionMode;
  /**
   * Starts a session (per-client: spawns its server). Throws 503 `unavailable` when the owner's
   * client holds its share (`max_sessions_per_client`), or when every session is taken and none
   * can be reclaimed from a client holding more than this one (the longest-idle is, otherwise).
   * Without an owner: an anonymous client of its own.
   */
  open(owner?: SessionOwner): Promise<string>;
  /** The session exists and is bound to `subject` (undefined: to none). */
  has(id: string, subject?: string): boolean;
  /** False when there was no such session bound to `subject` (nothing is ended then). */
  end(id: string, subject?: string): Promise<boolean>;
  /**
   * The notifications the session's server sends outside any call (list changes, resource
   * updates), to `listener` until the returned function is called; the session is not idle
   * meanwhile. Undefined when there is no such session bound to `subject`, or its server's
   * notifications are not its own (a shared child's are every client's).
   */
  listen?(
    id: string,
    subject: string | undefined,
    listener: (notification: Record<string, unknown>) => void,
  ): (() => void) | undefined;
}

/**
 * A JSON-RPC endpoint the gateway itself can call (stdio child, or JSON-RPC over HTTP).
 * `call` returns the response message (with the caller's original id) or `undefined` for a
 * notification. Implementations remap ids so that concurrent callers never collide.
 */
export interface RpcUpstream extends UpstreamBase {
  call(message: JsonRpcRequest, options?: RpcCallOptions): Promise<Record<string, unknown> | undefined>;
  /** Present when the upstream keeps client sessions (a stdio MCP server). */
  sessions?: RpcSessions;
}

export type Upstream = UpstreamBase | HttpUpstream | RpcUpstream;

export function isHttpUpstream(u: Upstream): u is HttpUpstream {
  return typeof (u as HttpUpstream).forward === 'function';
}

export function isRpcUpstream(u: Upstream): u is RpcUpstream {
  return typeof (u as RpcUpstream).call === 'function';
}
