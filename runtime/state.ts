/**
 * The typed per-request state shared by the stages of a pipeline (Koa's `ctx.state`).
 * Stages read and enrich it instead of re-parsing the body. Plugins may add fields of their own
 * through declaration merging on `GatewayState`.
 */
import type { Next, ParameterizedContext } from 'koa';
import type { Dialect } from './dialects.ts';
import type { Mode } from './mode.ts';

export type JsonRpcId = string | number | null;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown> | unknown[];
  id?: JsonRpcId;
}

export interface Violation {
  /** JSON path relative to the request, e.g. `$.arguments.message`. */
  path: string;
  message: string;
}

export interface ResolvedSType {
  id: string;
  version: string;
  /** `approved` or `pending`, from the registry. */
  status?: string;
}

export interface QomResult {
  profile: string;
  score: number;
  threshold: number;
  passed: boolean;
  dimensions: Record<string, number>;
  /** Why each dimension scored what it did; filled when explanation is asked for. */
  explanation?: Record<string, string>;
}

export interface PolicyDecision {
  action: 'allow' | 'deny' | 'flag' | 'redact';
  policy?: string;
  rule?: string;
  detail?: string;
  /** Regulation the rule enforces (e.g. `GDPR`), for the audit trail. */
  regulation?: string;
  /** Where the decision was taken: `ingress` (the request) or `egress` (the upstream's answer). */
  phase?: string;
  /** Machine-readable facts about the decision (scores, spans masked, bytes of a stream scanned). */
  details?: Record<string, unknown>;
}

export interface Caller {
  /** Stable identity of the caller: a token name, a tenant id, or the client address. */
  id: string;
  authenticated: boolean;
  attributes?: Record<string, unknown>;
}

export interface RequestLimits {
  bodyBytes: number;
  jsonDepth: number;
}

export interface GatewayState {
  requestId: string;
  service: string;
  /** Route id (method + path pattern), for logs and metrics. */
  route: string;
  /** Enforcement mode of the route (else the service's), when one is set; checked at load. */
  mode?: Mode;
  caller?: Caller;
  /**
   * Name of the upstream an earlier stage chose for this request (e.g. a tenant's backend); a
   * proxy stage uses it instead of its default.
   */
  upstream?: string;
  /** Limits of the service (body size, JSON depth), read by readBody/readJson. */
  limits: RequestLimits;
  /** The raw request body, once read (see readBody); forwarded as is when unchanged. */
  rawBody?: Buffer;
  /** The parsed JSON body, once a stage asked for it (see readJson). */
  json?: unknown;
  /** The JSON-RPC request carried by the body, once parsed. */
  rpc?: JsonRpcRequest;
  /** Set when a stage changed `rpc` so that it must be re-serialised before forwarding. */
  rpcModified?: boolean;
  /**
   * What the parsed JSON-RPC body was: a request (with an id), a notification, or a client's
   * response to a server request (then `rpc` stays unset: there is no method to check).
   */
  rpcKind?: 'request' | 'notification' | 'response';
  stype?: ResolvedSType;
  /** Schema validation of the request. */
  validation?: { valid: boolean; violations: Violation[] };
  /** Schema validation of the upstream's result, where the SType defines an output schema. */
  resultValidation?: { valid: boolean; violations: Violation[] };
  qom?: QomResult;
  decision?: PolicyDecision;
  /** Every decision taken for this request, in order (ingress first); the audit trail records them. */
  decisions?: PolicyDecision[];
  /**
   * Installed by an audit stage: appends the decisions not yet recorded and resolves once they are
   * durable. A stage that decides after the response has started (a stream) calls it before it
   * ends the response, so that whatever the client saw is on record.
   */
  auditFlush?: () => Promise<void>;
  /** The upstream's JSON-RPC response, when a stage needs to inspect it (set by the proxy). */
  rpcResponse?: unknown;
  /**
   * Hooks applied by the proxy to the upstream's JSON-RPC response message (from a JSON body or
   * from the matching SSE event), in registration order. A hook may return a replacement message
   * (e.g. an error object, or a filtered `tools/list` result). Earlier stages register them.
   */
  rpcResponseHooks?: RpcResponseHook[];
  /**
   * Hooks on the upstream's whole JSON answer (a non-streamed HTTP answer with a JSON content
   * type), applied by the proxy in registration order before anything is written. A hook returns
   * the body to send: the same object means unchanged (the upstream's bytes are sent as they
   * came), another object replaces it (so change a copy, never the body in place); or it throws a
   * GatewayError to answer with an error instead.
   */
  responseJsonHooks?: ResponseJsonHook[];
  /**
   * Filters on an SSE answer, applied event by event as the stream passes (nothing waits for its
   * end). Stages that inspect streamed answers (egress checks) register a factory; the proxy makes
   * the filter only when the answer turns out to be a stream, so JSON answers pay nothing for it.
   */
  sseFilters?: SseFilterFactory[];
  /** Set when a stage changed `json` (e.g. masked spans) so that it is re-serialised before forwarding. */
  jsonModified?: boolean;
  /**
   * The route's error dialect, for a stage that must write an error after the response started
   * (an error event at the end of a stream): `dialect.render(err).body`.
   */
  dialect?: Dialect;
  /** W3C trace context to send upstream (`traceparent` header value). */
  traceparent?: string;
  /** Free-form notes stages leave for later stages, logs and response metadata. */
  annotations: Record<string, unknown>;
}

export type GatewayContext = ParameterizedContext<GatewayState>;
export type RpcResponseHook = (
  response: Record<string, unknown>,
  ctx: GatewayContext,
) => Record<string, unknown> | Promise<Record<string, unknown>>;
export type Stage = (ctx: GatewayContext, next: Next) => Promise<void>;
export type ResponseJsonHook = (body: unknown, ctx: GatewayContext) => unknown | Promise<unknown>;

/** One server-sent event: `data` is its data lines joined with newlines. */
export interface SseEvent {
  event?: string;
  id?: string;
  data: string;
}

/** What a filter does with an event: the events to write in its place, and whether the stream ends after them. */
export interface SseVerdict {
  events: SseEvent[];
  /** End the stream after these events (the upstream's remaining answer is dropped). */
  end?: boolean;
}

export interface SseFilter {
  onEvent(event: SseEvent): SseVerdict | Promise<SseVerdict>;
  /** The upstream's stream ended normally: events to append before the end. */
  onEnd?(): SseEvent[] | Promise<SseEvent[]>;
}
/** Makes the filter of one streamed answer (its state: windows, counters) for the request. */
export type SseFilterFactory = (ctx: GatewayContext) => SseFilter;
export type { Next };
