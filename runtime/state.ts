/**
 * The typed per-request state shared by the stages of a pipeline (Koa's `ctx.state`).
 * Stages read and enrich it instead of re-parsing the body.
 *
 * Only what the runtime itself speaks is declared here: the request core's fields, the request
 * and answer views, the protocols it parses (JSON-RPC), callers, upstream choice, decisions. A
 * plugin family's own vocabulary is declared by that family, by declaration merging on
 * `GatewayState` in its `api.ts` (e.g. `stype`, `validation`, `qom` in
 * plugins/stype-registry/api.ts, `classifications` in plugins/classify/api.ts); `needs` and
 * `provides` name those fields like any other.
 */

import type { Next, ParameterizedContext } from 'koa';
import type { Answer } from './answer/answer.ts';
import type { StageAnswer } from './answer/stage-answer.ts';
import type { Dialect } from './dialects.ts';
import type { DryRun } from './dry-run.ts';
import type { UpstreamRequest } from './exchange/request.ts';
import type { Mode } from './mode.ts';
import type { RequestTrace } from './observability/request-trace.ts';

export type JsonRpcId = string | number | null;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown> | unknown[];
  id?: JsonRpcId;
}

export interface PolicyDecision {
  /**
   * One vocabulary everywhere (headers, metrics, audit): `block` refuses, `redact` masks, `flag`
   * records, `allow` lets through; `unchecked` refused an answer a stage could not read, and
   * `passed-unchecked` let one through unread because the stage was configured to (on_uninspectable: pass).
   */
  action: 'allow' | 'block' | 'flag' | 'redact' | 'unchecked' | 'passed-unchecked';
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

/** One upstream given up on before the answer started (failover), and why. */
export interface ProviderFailure {
  upstream: string;
  /** `connect` (nothing reached it), `timeout` (no answer in time), `status` (5xx, 429), `unavailable` (max_requests), `broken` (answer cut short). */
  reason: 'connect' | 'timeout' | 'status' | 'unavailable' | 'broken';
  /** The HTTP status it answered, for `status`. */
  status?: number;
}

export interface ProvidersTried {
  /** The upstream whose answer this is; undefined when every one failed. */
  served?: string;
  failed: ProviderFailure[];
}

export interface RequestLimits {
  bodyBytes: number;
  jsonDepth: number;
  /** The most an answer-phase stage reads of an upstream's answer (whole body, decoded; one event). */
  answerBytes: number;
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
   * Name of the upstream an earlier stage chose for this request (e.g. a tenant's backend), or an
   * ordered list of them (providers tried in turn, see `providers`); a proxy stage uses it instead
   * of its default.
   */
  upstream?: string | readonly string[];
  /**
   * Which upstream served the answer (`served`) and, when others were tried first, why each one
   * failed (`failed`, in the order tried). Set by the proxy stage on HTTP upstreams; response
   * headers and the audit trail report it.
   */
  providers?: ProvidersTried;
  /** Limits of the service (body size, JSON depth), read by readBody/readJson. */
  limits: RequestLimits;
  /** The raw request body, once read (see readBody); forwarded as is when unchanged. */
  rawBody?: Buffer;
  /** The parsed JSON body, once a stage asked for it (see readJson). */
  json?: unknown;
  /** The JSON-RPC request carried by the body, once parsed. */
  rpc?: JsonRpcRequest;
  /** Set when a stage changed `rpc` so that it must be re-serialised before forwarding (older form of `requestOf(ctx).setRpc`). */
  rpcModified?: boolean;
  /**
   * What the parsed JSON-RPC body was: a request (with an id), a notification, or a client's
   * response to a server request (then `rpc` stays unset: there is no method to check).
   */
  rpcKind?: 'request' | 'notification' | 'response';
  /**
   * The MCP session (`Mcp-Session-Id`) the request belongs to, once a stage checked that it is one
   * the gateway issued and still live (or issued it, at `initialize`); the audit trail attributes
   * records to it. A session id a client merely claims is never put here.
   */
  mcpSession?: string;
  decision?: PolicyDecision;
  /** Every decision taken for this request, in order (ingress first); the audit trail records them. */
  decisions?: PolicyDecision[];
  /** Set when a stage changed `json` (e.g. masked spans) so that it is re-serialised before forwarding (older form of `requestOf(ctx).setJson`). */
  jsonModified?: boolean;
  /**
   * The request view (runtime/exchange/request.ts): headers and body that go upstream as stages
   * changed them. Made on first use by `requestOf(ctx)`.
   */
  request?: UpstreamRequest;
  /**
   * The route's error dialect, for a stage that must write an error after the response started
   * (an error event at the end of a stream): `dialect.render(err).body`.
   */
  dialect?: Dialect;
  /**
   * The answer the terminal stage left (status, headers, body as JSON, bytes or events), which
   * answer-phase stages inspect or replace after `await next()`; see runtime/answer/answer.ts.
   * A stage reads it through the handle its `next()` resolves with; what a terminal stage wrote
   * the Koa way (`ctx.body`) is made into one when it returns (adoptContextAnswer).
   */
  answer?: Answer;
  /** W3C trace context to send upstream (`traceparent` header value). */
  traceparent?: string;
  /**
   * Set on a dry run only (runtime/dry-run.ts): the request runs the route's pipeline without
   * side effects; stages with a dry-run handler read what it brings and report on it.
   */
  dryRun?: DryRun;
  /** Upstream wait time and, when tracing is on, the current span: pass it to upstream calls. */
  trace?: RequestTrace;
  /** Free-form notes stages leave for later stages, logs and response metadata. */
  annotations: Record<string, unknown>;
}

export type GatewayContext = ParameterizedContext<GatewayState>;
/**
 * A stage's `next`: runs the rest of the pipeline and resolves with the calling stage's answer
 * handle (runtime/answer/stage-answer.ts), or with nothing when the stage is called outside the
 * composer (a test's own `next`).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a test's `async () => {}` is a valid next
export type StageNext = () => Promise<StageAnswer | void>;
/** A stage: Koa middleware whose `next()` resolves with its answer handle (a stage may `return next()`). */
// biome-ignore lint/suspicious/noConfusingVoidType: most stages return nothing
export type Stage = (ctx: GatewayContext, next: StageNext) => Promise<StageAnswer | void>;
/** Koa's `next` (its value untyped), for stages written against it. */
export type { Next };
