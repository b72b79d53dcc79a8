/**
 * JSON-RPC 2.0 and MCP envelopes: what a message is and where its payload lives. Pure functions,
 * the one reader of these shapes for every stage (schema validation, QoM, policy data, SType
 * resolution, response hooks).
 */

import { type Holder, jsonWalkLimits, walkJson } from './json-walk.ts';

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
  // One budget for both schemas (runtime/wire/json-walk.ts): a hostile definition costs its size.
  const budget = { entries: jsonWalkLimits.entries };
  const collect = (_holder: Holder, _key: string | number, text: string) => {
    out.push(text);
  };
  walkJson(tool, 'inputSchema', collect, budget, true);
  walkJson(tool, 'outputSchema', collect, budget, true);
  return out.filter((t) => t !== '').join('\n');
}

/** A field of a response that a model reads: `holder[key]` is a string. */
interface ResultField {
  holder: Holder;
  key: string | number;
  text: string;
}

/**
 * The fields of a JSON-RPC response a model reads, in order: of an MCP tool result (or any
 * result) each `content[]` item's `text` and its embedded `resource.text`, then every string
 * value of `structuredContent` at any depth; of an error its `message` and every string value of
 * its `data`. Bounded like toolDefinitionText: JSON beyond the walk's bound is read as one field,
 * its JSON text.
 */
function resultFields(response: unknown): ResultField[] {
  const out: ResultField[] = [];
  if (!isObject(response)) return out;
  const budget = { entries: jsonWalkLimits.entries };
  const collect = (holder: Holder, key: string | number, text: string) => {
    out.push({ holder, key, text });
  };
  const result = response.result;
  if (isObject(result)) {
    if (Array.isArray(result.content)) {
      for (const item of result.content) {
        if (!isObject(item)) continue;
        if (typeof item.text === 'string') out.push({ holder: item, key: 'text', text: item.text });
        const resource = item.resource;
        if (isObject(resource) && typeof resource.text === 'string') {
          out.push({ holder: resource, key: 'text', text: resource.text });
        }
      }
    }
    walkJson(result, 'structuredContent', collect, budget, false);
  }
  const error = response.error;
  if (isObject(error)) {
    if (typeof error.message === 'string') out.push({ holder: error, key: 'message', text: error.message });
    walkJson(error, 'data', collect, budget, false);
  }
  return out;
}

/** The text a model reads in a JSON-RPC response (resultFields), joined with newlines. */
export function responseText(response: unknown): string {
  return resultFields(response)
    .map((f) => f.text)
    .filter((t) => t !== '')
    .join('\n');
}

/**
 * A copy of the response with every field resultFields reads replaced by `mask(text)` (the
 * response given is not changed); the same object when nothing changed. A field read as JSON text
 * (beyond the walk's bound) is replaced by its masked text.
 */
export async function maskResponse(
  response: Record<string, unknown>,
  mask: (text: string) => string | Promise<string>,
): Promise<Record<string, unknown>> {
  const copy = structuredClone(response);
  const fields = resultFields(copy);
  const masked = await Promise.all(fields.map((f) => mask(f.text)));
  let changed = false;
  for (let i = 0; i < fields.length; i++) {
    if (masked[i] === fields[i].text) continue;
    changed = true;
    (fields[i].holder as Record<string, unknown>)[fields[i].key as string] = masked[i];
  }
  return changed ? copy : response;
}
