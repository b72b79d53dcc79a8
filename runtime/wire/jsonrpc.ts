/**
 * JSON-RPC 2.0 and MCP envelopes: what a message is and where its payload lives. Pure functions,
 * the one reader of these shapes for every stage (schema validation, QoM, policy data, SType
 * resolution, response hooks).
 */

/** The part of a request these helpers read. */
export interface RpcMessage {
  method: string;
  params?: unknown;
}

/** An MCP `tools/call`: the tool's name (null when absent or not a string) and its arguments. */
export interface ToolCall {
  name: string | null;
  /** `params.arguments`; `{}` when absent (MCP allows leaving them out). */
  arguments: unknown;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A response (`id` with `result` or `error`, no `method`), as opposed to a request or notification. */
export function isRpcResponse(value: unknown): value is Record<string, unknown> {
  return isObject(value) && 'id' in value && ('result' in value || 'error' in value) && !('method' in value);
}

/** The tool call of a `tools/call` message; undefined for any other method. */
export function toolCallOf(rpc: RpcMessage): ToolCall | undefined {
  if (rpc.method !== 'tools/call') return undefined;
  const params = isObject(rpc.params) ? rpc.params : undefined;
  const name = params?.name;
  return { name: typeof name === 'string' ? name : null, arguments: params?.arguments ?? {} };
}

/**
 * What an SType describes: for `tools/call` the tool arguments (paths `$.arguments.<field>`,
 * relative to the request's params), for any other method the params (paths `$.<field>`).
 */
export function messagePayload(rpc: RpcMessage): { payload: unknown; root: '$' | '$.arguments' } {
  const call = toolCallOf(rpc);
  if (call) return { payload: call.arguments, root: '$.arguments' };
  return { payload: rpc.params ?? {}, root: '$' };
}
