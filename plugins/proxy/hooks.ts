/**
 * Response hooks: stages registered them on `ctx.state.rpcResponseHooks` to inspect or replace
 * the upstream's JSON-RPC response (validate a result, filter `tools/list`...). They run in
 * registration order, each on the previous one's output.
 */
import { type GatewayContext, jsonrpcWire, type RpcResponseHook } from '../../runtime/index.ts';

type Message = Record<string, unknown>;

const { isRpcResponse } = jsonrpcWire;

export async function applyHooks(msg: Message, hooks: RpcResponseHook[], ctx: GatewayContext): Promise<Message> {
  let current = msg;
  for (const hook of hooks) current = (await hook(current, ctx)) ?? current;
  return current;
}

/**
 * Applies the hooks to a parsed JSON body (one response or a batch). Returns the new body and
 * the responses it holds, so the caller can publish a single one on `ctx.state.rpcResponse`.
 */
export async function transformJsonBody(
  body: unknown,
  hooks: RpcResponseHook[],
  ctx: GatewayContext,
): Promise<{ body: unknown; responses: Message[] }> {
  if (isRpcResponse(body)) {
    const out = await applyHooks(body, hooks, ctx);
    return { body: out, responses: [out] };
  }
  if (Array.isArray(body)) {
    const responses: Message[] = [];
    const out = [];
    for (const item of body) {
      if (!isRpcResponse(item)) {
        out.push(item);
        continue;
      }
      const replaced = await applyHooks(item, hooks, ctx);
      responses.push(replaced);
      out.push(replaced);
    }
    return { body: out, responses };
  }
  return { body, responses: [] };
}
