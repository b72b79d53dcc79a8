/**
 * Proxying to an RPC upstream (a stdio child): the gateway is the HTTP end of the MCP
 * streamable-HTTP transport. POST carries one JSON-RPC message; requests answer 200 JSON,
 * notifications (and client responses, which the gateway already handled) 202 with no body.
 * There is no server-to-client stream: GET answers 405, which MCP clients accept.
 *
 * An upstream that keeps client sessions (a stdio MCP server) gets them managed here, as the
 * transport specifies: `initialize` opens one and its answer carries the `Mcp-Session-Id`; later
 * requests must carry it (400 without it from an MCP client, 404 once it is unknown or expired)
 * and DELETE ends it. A request with neither the session header nor `MCP-Protocol-Version` is a
 * plain JSON-RPC client's (the seed's `POST /`): it goes to the gateway's own server session.
 *
 * A session belongs to the authenticated subject that opened it (runtime/session-owner.ts): with any
 * other subject's credentials (or none) its id is answered 404, as an unknown one, on POST, GET
 * and DELETE alike; and one client's share of the sessions is bounded (the upstream's
 * `max_sessions_per_client`).
 */
import {
  Answer,
  ClientAbort,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type RpcSessions,
  type RpcUpstream,
  readJson,
  respond,
  sessionOwner,
  subjectOf,
} from '../../runtime/index.ts';
import { unknownSession } from './session-binding.ts';

/** `sessions: false` (the typed-send route, `via: call`): always the gateway's own session. */
export async function proxyRpc(
  ctx: GatewayContext,
  upstream: RpcUpstream,
  timeoutMs?: number,
  sessions: RpcSessions | undefined = upstream.sessions,
): Promise<void> {
  const sessionId = sessions ? ctx.get('mcp-session-id') || undefined : undefined;
  const subject = sessions ? subjectOf(ctx) : undefined;
  if (sessions && ctx.method === 'DELETE') return endSession(ctx, sessions, sessionId, subject);
  if (ctx.method !== 'POST') {
    // A stream of a session that is not the caller's is not found, before there is no stream at all.
    if (sessions && sessionId !== undefined && !sessions.has(sessionId, subject)) throw unknownSession();
    const allow = sessions ? 'POST, DELETE' : 'POST';
    throw new GatewayError('method_not_allowed', `This endpoint accepts ${allow}`, { headers: { Allow: allow } });
  }
  const rpc = ctx.state.rpc ?? (await parseMessage(ctx));
  let session: string | undefined;
  if (sessions && rpc?.method === 'initialize') session = await sessions.open(sessionOwner(ctx));
  else if (sessionId !== undefined) {
    if (!sessions?.has(sessionId, subject)) throw unknownSession();
    session = sessionId;
    ctx.state.mcpSession = session; // a session the gateway issued: the audit trail may name it
  } else if (sessions && ctx.get('mcp-protocol-version')) throw sessionRequired();
  if (!rpc) return accepted(ctx);
  // A client that goes away cancels the call: the response's ClientAbort (no AbortController, no
  // listener to undo per call; the watch lasts as long as the response).
  const signal = ClientAbort.watch(ctx.res);
  let response: Record<string, unknown> | undefined;
  try {
    response = await upstream.call(rpc, { timeoutMs, signal, session, trace: ctx.state.trace });
  } catch (err) {
    if (rpc.method === 'initialize' && session) await sessions?.end(session, subject);
    throw err;
  }
  if (rpc.method === 'initialize' && session) {
    // A refused initialize opens nothing.
    if (!response || response.error !== undefined) await sessions?.end(session, subject);
    else {
      ctx.set('Mcp-Session-Id', session);
      ctx.state.mcpSession = session;
    }
  }
  if (!response) return accepted(ctx);
  // The response message is the answer: the stages' answer phase reads it (already parsed).
  ctx.state.answer = Answer.fromJson(ctx, response);
}

async function endSession(
  ctx: GatewayContext,
  sessions: RpcSessions,
  id: string | undefined,
  subject: string | undefined,
): Promise<void> {
  if (id === undefined) throw sessionRequired();
  if (!(await sessions.end(id, subject))) throw unknownSession();
  respond(ctx, null, { status: 204 });
}

function sessionRequired(): GatewayError {
  return new GatewayError('bad_request', 'Mcp-Session-Id header required: use the one the initialize answer carried', {
    code: 'session_required',
    rpcCode: -32000,
  });
}

/** 202 with no body. */
function accepted(ctx: GatewayContext): void {
  respond(ctx, null, { status: 202 });
}

/**
 * For pipelines without a parsing stage. Returns undefined for a client's JSON-RPC response
 * (the answer to a server request), which has nowhere to go.
 */
async function parseMessage(ctx: GatewayContext): Promise<JsonRpcRequest | undefined> {
  if (ctx.state.rpcKind === 'response') return undefined;
  const body = await readJson(ctx);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new GatewayError('bad_request', 'Expected one JSON-RPC message (an object)');
  }
  const msg = body as Record<string, unknown>;
  if (typeof msg.method === 'string') return msg as unknown as JsonRpcRequest;
  if ('result' in msg || 'error' in msg) return undefined;
  throw new GatewayError('bad_request', 'Expected a JSON-RPC message with a "method"');
}
