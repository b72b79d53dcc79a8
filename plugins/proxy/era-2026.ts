/**
 * A modern MCP client (2026-07-28: stateless, its version and capabilities in each request's
 * `_meta`) in front of a legacy RPC upstream (an MCP server over HTTP: era-2026-http.ts) that keeps sessions (a stdio MCP server of the 2025
 * revisions, the shipped reference server included). The gateway speaks the legacy protocol to the
 * upstream on the client's behalf:
 *
 * - It holds one upstream session per client — the authenticated subject, else the client's
 *   address (runtime/session-owner.ts: the same key the session share is counted by) — opened
 *   with its own `initialize` at the client's first request and opened again when it ends (idle,
 *   evicted, its child gone). Sessions are never shared between subjects: with authentication a
 *   subject's session is found with that subject only. Without authentication nothing but the
 *   address tells modern clients apart (the revision has no session id): clients behind one
 *   address share one upstream session then.
 * - `server/discover` is answered from the upstream's `initialize` answer (its capabilities less
 *   what cannot be mapped: list-changed and resource subscriptions, logging, tasks); every other
 *   request goes to the session with the modern `_meta` keys taken out, and its answer comes back
 *   in the modern shape: `resultType: "complete"`, `ttlMs: 0` and `cacheScope: "private"` on the
 *   cacheable results (the session is the client's: nothing is for a shared cache), the upstream's
 *   `serverInfo` in `_meta`, and resource-not-found -32002 renumbered -32602.
 * - Cancellation is the transport's: the client closing its request ends the upstream call (the
 *   upstream is sent `notifications/cancelled`). A client's `notifications/cancelled` over HTTP is
 *   accepted and not forwarded (the revision uses it on stdio only; over a shared session it could
 *   name another client's request id).
 * - What cannot be mapped is a clear error, never a hang: `subscriptions/listen` is -32601; the
 *   upstream session declares no client capabilities, so a server that still sends a request
 *   (sampling, elicitation, roots) gets method-not-found from the gateway and answers the call
 *   with its own error. Progress notifications are not relayed (the answer is one JSON object).
 */
import {
  Answer,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type RpcSessions,
  type RpcUpstream,
  type SessionOwner,
  sessionOwner,
} from '../../runtime/index.ts';

export const modernVersion = '2026-07-28';
/** The legacy version the gateway asks the upstream for (the upstream may answer an older one). */
export const legacyVersion = '2025-11-25';
const meta = 'io.modelcontextprotocol/';
const serverInfoKey = `${meta}serverInfo`;
/** Results the revision makes cacheable (CacheableResult: ttlMs and cacheScope required). */
const cacheable = new Set([
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
]);
/** Versions the gateway speaks to a modern client in front of a legacy upstream, newest first. */
const supported = [modernVersion, '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

/** The protocol version a request's `_meta` names, undefined for a legacy message. */
export function modernVersionOf(rpc: JsonRpcRequest | undefined): unknown {
  const params = rpc?.params;
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return undefined;
  const m = (params as Record<string, unknown>)._meta;
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return undefined;
  return (m as Record<string, unknown>)[`${meta}protocolVersion`];
}

interface Held {
  id: string;
  subject?: string;
  /** The upstream's initialize result. */
  init: Record<string, unknown>;
}

/** The upstream sessions the gateway holds for modern clients, one per client (see above). */
export class HeldSessions {
  readonly #held = new Map<string, Promise<Held>>();

  constructor(
    private readonly upstream: RpcUpstream,
    private readonly sessions: RpcSessions,
  ) {}

  /** The client's session, opened (initialize + initialized) when it has none live. */
  async of(owner: SessionOwner, timeoutMs?: number): Promise<Held> {
    const key = owner.client;
    const current = this.#held.get(key);
    if (current) {
      const held = await current.catch(() => undefined);
      if (held && this.sessions.has(held.id, owner.subject)) return held;
      if (this.#held.get(key) === current) this.#held.delete(key);
    }
    const again = this.#held.get(key);
    if (again) return again; // another request of the client opened it meanwhile
    this.#sweep();
    const opening = this.#open(owner, timeoutMs);
    this.#held.set(key, opening);
    opening.catch(() => {
      if (this.#held.get(key) === opening) this.#held.delete(key);
    });
    return opening;
  }

  /** Entries of sessions that ended (each is looked at when it settled): the map stays as big as the live ones. */
  #sweep(): void {
    for (const [key, entry] of this.#held) {
      entry.then(
        (held) => {
          if (!this.sessions.has(held.id, held.subject) && this.#held.get(key) === entry) this.#held.delete(key);
        },
        () => {},
      );
    }
  }

  async #open(owner: SessionOwner, timeoutMs?: number): Promise<Held> {
    const id = await this.sessions.open(owner);
    try {
      const answer = await this.upstream.call(
        {
          jsonrpc: '2.0',
          id: 'switchyard-initialize',
          method: 'initialize',
          params: {
            protocolVersion: legacyVersion,
            // None: the gateway cannot relay a server's requests to a modern client (see above).
            capabilities: {},
            clientInfo: { name: 'switchyard', version: '0.1.0' },
          },
        },
        { session: id, timeoutMs },
      );
      const result = answer?.result;
      if (!result || typeof result !== 'object' || answer?.error !== undefined) {
        throw new GatewayError(
          'upstream_error',
          'The upstream refused the MCP session the gateway opened for the client',
          {
            details: { upstream: this.upstream.name, error: answer?.error },
          },
        );
      }
      await this.upstream.call({ jsonrpc: '2.0', method: 'notifications/initialized' }, { session: id });
      return { id, subject: owner.subject, init: result as Record<string, unknown> };
    } catch (err) {
      await this.sessions.end(id, owner.subject);
      throw err;
    }
  }
}

/** Held sessions per upstream's sessions: shared by every route and reload using that upstream. */
const heldBySessions = new WeakMap<RpcSessions, HeldSessions>();

export function heldSessionsOf(upstream: RpcUpstream, sessions: RpcSessions): HeldSessions {
  let held = heldBySessions.get(sessions);
  if (!held) {
    held = new HeldSessions(upstream, sessions);
    heldBySessions.set(sessions, held);
  }
  return held;
}

/** Sends a modern request to the client's legacy session and leaves the modern answer on ctx.state.answer. */
export async function proxyModern(
  ctx: GatewayContext,
  upstream: RpcUpstream,
  held: HeldSessions,
  rpc: JsonRpcRequest,
  timeoutMs?: number,
): Promise<void> {
  unsupportedModern(rpc);
  if (rpc.id === undefined) {
    // notifications/cancelled (or another notification): accepted, never forwarded (see above).
    ctx.body = null;
    ctx.status = 202;
    return;
  }
  if (rpc.method === 'subscriptions/listen') throw unmappable(rpc.method, upstream.name);
  const session = await held.of(sessionOwner(ctx), timeoutMs);
  const serverInfo = session.init.serverInfo;
  if (rpc.method === 'server/discover') {
    ctx.state.answer = Answer.fromJson(ctx, { jsonrpc: '2.0', id: rpc.id, result: discoverResult(session.init) });
    return;
  }
  const abort = new AbortController();
  const onClose = () => abort.abort();
  ctx.res.once('close', onClose);
  let response: Record<string, unknown> | undefined;
  try {
    response = await upstream.call(
      { ...rpc, params: legacyParams(rpc.params) },
      { timeoutMs, signal: abort.signal, session: session.id, trace: ctx.state.trace },
    );
  } finally {
    ctx.res.off('close', onClose);
  }
  if (!response)
    throw new GatewayError('upstream_error', 'The upstream sent no answer', { details: { upstream: upstream.name } });
  answerModern(ctx, modernResponse(response, rpc.method, serverInfo));
}

/** The modern answer; method not found is HTTP 404, as the revision's transport requires. */
export function answerModern(ctx: GatewayContext, response: Record<string, unknown>): void {
  const code = (response.error as { code?: unknown } | undefined)?.code;
  ctx.state.answer = Answer.fromJson(ctx, response, code === -32601 ? 404 : 200);
}

/** -32022 for a modern version other than the one mapped (when no mcp-validate stage refused it first). */
export function unsupportedModern(rpc: JsonRpcRequest): void {
  const version = modernVersionOf(rpc);
  if (version === modernVersion) return;
  throw new GatewayError('bad_request', 'Unsupported protocol version', {
    rpcCode: -32022,
    details: { supported, requested: typeof version === 'string' ? version.slice(0, 64) : null },
  });
}

/** A modern method this mapping cannot carry: a clear -32601 at once. */
export function unmappable(method: string, upstream: string): GatewayError {
  return new GatewayError(
    'not_found',
    `Method not found: ${method} is not available through this gateway for this upstream`,
    { rpcCode: -32601, details: { method, upstream } },
  );
}

/** The request's params as a legacy server reads them: the modern `_meta` keys (version, capabilities…) out. */
export function legacyParams(params: JsonRpcRequest['params']): JsonRpcRequest['params'] {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return params;
  const { _meta, ...rest } = params as Record<string, unknown>;
  if (_meta === null || typeof _meta !== 'object' || Array.isArray(_meta)) return params;
  const kept = Object.entries(_meta as Record<string, unknown>).filter(([key]) => !key.startsWith(meta));
  return kept.length > 0 ? { ...rest, _meta: Object.fromEntries(kept) } : rest;
}

/** A legacy response in the modern shape (see the header comment). */
export function modernResponse(
  response: Record<string, unknown>,
  method: string,
  serverInfo: unknown,
): Record<string, unknown> {
  const error = response.error as Record<string, unknown> | undefined;
  if (error && typeof error === 'object') {
    // Resource not found: -32002 in the 2025 revisions, invalid params in 2026-07-28.
    return error.code === -32002 ? { ...response, error: { ...error, code: -32602 } } : response;
  }
  const result = response.result;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return response;
  const r = result as Record<string, unknown>;
  const out: Record<string, unknown> = { ...r, resultType: r.resultType ?? 'complete' };
  if (cacheable.has(method)) {
    out.ttlMs ??= 0;
    out.cacheScope ??= 'private';
  }
  if (isImplementation(serverInfo)) out._meta = { ...asObject(r._meta), [serverInfoKey]: serverInfo };
  return { ...response, result: out };
}

/** `server/discover`: what the upstream's initialize said, less what this mapping cannot carry. */
export function discoverResult(init: Record<string, unknown>): Record<string, unknown> {
  const capabilities: Record<string, unknown> = {};
  const given = asObject(init.capabilities);
  for (const name of ['tools', 'prompts', 'resources', 'completions', 'experimental'] as const) {
    const value = given[name];
    if (value === null || typeof value !== 'object') continue;
    // No subscriptions/listen through this mapping: no list-changed or resource subscriptions.
    const { listChanged: _l, subscribe: _s, ...rest } = value as Record<string, unknown>;
    capabilities[name] = name === 'experimental' ? value : rest;
  }
  const result: Record<string, unknown> = {
    resultType: 'complete',
    supportedVersions: supported,
    capabilities,
    ttlMs: 0,
    cacheScope: 'private',
  };
  if (typeof init.instructions === 'string') result.instructions = init.instructions;
  if (isImplementation(init.serverInfo)) result._meta = { [serverInfoKey]: init.serverInfo };
  return result;
}

function isImplementation(v: unknown): v is Record<string, unknown> {
  const o = v as Record<string, unknown> | null;
  return o !== null && typeof o === 'object' && typeof o.name === 'string' && typeof o.version === 'string';
}

function asObject(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
