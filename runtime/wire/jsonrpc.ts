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

/** Bounds of the walk of one tool's schemas (a hostile listing costs time proportional to its size). */
const definitionWalk = { depth: 32, entries: 20_000 } as const;

/**
 * The text a model reads in an MCP tool definition (a `tools/list` entry), joined with newlines:
 * `name`, `title`, `description`, `annotations.title`, then of `inputSchema` and `outputSchema`
 * every string at any depth (descriptions, titles, enum values, defaults, examples) and every
 * property name. What lies beyond the walk's bound (32 levels, 20,000 keys and items) is read as
 * its JSON text, so nothing in a definition goes unread.
 */
export function toolDefinitionText(tool: unknown): string {
  if (!isObject(tool)) return '';
  const out: string[] = [];
  for (const key of ['name', 'title', 'description']) if (typeof tool[key] === 'string') out.push(tool[key]);
  const annotations = tool.annotations;
  if (isObject(annotations) && typeof annotations.title === 'string') out.push(annotations.title);
  const budget = { entries: definitionWalk.entries };
  const walk = (value: unknown, depth: number): void => {
    if (typeof value === 'string') {
      out.push(value);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    const entries = Array.isArray(value) ? value.length : Object.keys(value).length;
    if (depth >= definitionWalk.depth || entries > budget.entries) {
      out.push(JSON.stringify(value));
      return;
    }
    budget.entries -= entries;
    if (Array.isArray(value)) for (const item of value) walk(item, depth + 1);
    else {
      for (const [k, v] of Object.entries(value)) {
        out.push(k);
        walk(v, depth + 1);
      }
    }
  };
  walk(tool.inputSchema, 0);
  walk(tool.outputSchema, 0);
  return out.filter((t) => t !== '').join('\n');
}
