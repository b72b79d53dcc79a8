/**
 * Proxying to an RPC upstream (a stdio child): the gateway is the HTTP end of the MCP
 * streamable-HTTP transport. POST carries one JSON-RPC message; requests answer 200 JSON,
 * notifications (and client responses, which the gateway already handled) 202 with no body.
 * There is no server-to-client stream: GET and DELETE answer 405, which MCP clients accept.
 */
import {
  Answer,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type RpcUpstream,
  readJson,
} from '../../runtime/index.ts';

export async function proxyRpc(ctx: GatewayContext, upstream: RpcUpstream, timeoutMs?: number): Promise<void> {
  if (ctx.method !== 'POST') {
    throw new GatewayError('method_not_allowed', 'This endpoint accepts JSON-RPC messages by POST only', {
      headers: { Allow: 'POST' },
    });
  }
  const rpc = ctx.state.rpc ?? (await parseMessage(ctx));
  if (!rpc) return accepted(ctx);
  const abort = new AbortController();
  const onClose = () => abort.abort();
  ctx.res.once('close', onClose);
  let response: Record<string, unknown> | undefined;
  try {
    response = await upstream.call(rpc, { timeoutMs, signal: abort.signal, trace: ctx.state.trace });
  } finally {
    ctx.res.off('close', onClose);
  }
  if (!response) return accepted(ctx);
  // The response message is the answer: the stages' answer phase reads it (already parsed).
  ctx.state.answer = Answer.fromJson(ctx, response);
}

/** 202 with no body (Koa turns a null body into 204 unless the status is set afterwards). */
function accepted(ctx: GatewayContext): void {
  ctx.body = null;
  ctx.status = 202;
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
