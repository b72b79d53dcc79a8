/**
 * What a rule's json-logic condition sees (`{"var": "tool"}`, `{"var": "caller.id"}`...). The
 * fields are filled from the per-request state the earlier stages left; absent ones are null.
 * Nothing here is specific to one service: a JSON-RPC message fills method/tool/arguments/params,
 * any JSON body is under `body`, and earlier stages' notes are under `annotations`.
 */
import type { GatewayContext } from '../../runtime/index.ts';

export interface EvaluationData {
  /** JSON-RPC method. */
  method: string | null;
  /** Tool name of a `tools/call`. */
  tool: string | null;
  /** Tool arguments of a `tools/call`. */
  arguments: unknown;
  params: unknown;
  stype: string | null;
  stype_status: string | null;
  /** QoM score, when qom-score ran before. */
  qom: number | null;
  /** Schema validation outcome, when schema-validate ran before. */
  schema_valid: boolean | null;
  caller: { id: string | null; authenticated: boolean; attributes: Record<string, unknown> };
  mode: string;
  request: { method: string; path: string };
  body: unknown;
  annotations: Record<string, unknown>;
}

export function evaluationData(ctx: GatewayContext, mode: string): EvaluationData {
  const s = ctx.state;
  const rpc = s.rpc;
  const params = rpc?.params;
  const call = rpc?.method === 'tools/call' && isObject(params);
  const tool = call && typeof params.name === 'string' ? params.name : null;
  return {
    method: rpc?.method ?? null,
    tool,
    arguments: call ? (params.arguments ?? {}) : null,
    params: params ?? null,
    stype: s.stype?.id ?? null,
    stype_status: s.stype?.status ?? null,
    qom: s.qom?.score ?? null,
    schema_valid: s.validation?.valid ?? null,
    caller: {
      id: s.caller?.id ?? null,
      authenticated: s.caller?.authenticated ?? false,
      attributes: s.caller?.attributes ?? {},
    },
    mode,
    request: { method: ctx.method, path: ctx.path },
    body: s.json ?? null,
    annotations: s.annotations,
  };
}

/** The same request seen as a `tools/call` of `tool` with no arguments (to filter tools/list). */
export function asToolCall(
  base: EvaluationData,
  tool: string,
  stype: string | null,
  status: string | null,
): EvaluationData {
  const args = {};
  return {
    ...base,
    method: 'tools/call',
    tool,
    arguments: args,
    params: { name: tool, arguments: args },
    stype,
    stype_status: status,
    qom: null,
    schema_valid: null,
  };
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
