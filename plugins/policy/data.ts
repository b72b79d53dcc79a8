/**
 * What a rule's json-logic condition sees (`{"var": "tool"}`, `{"var": "caller.id"}`...). The
 * fields are filled from the per-request state the earlier stages left; absent ones are null.
 * Nothing here is specific to one service: a JSON-RPC message fills method/tool/arguments/params,
 * any JSON body is under `body`, and earlier stages' notes are under `annotations`.
 */
import { type GatewayContext, jsonrpcWire } from '../../runtime/index.ts';

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
  /** Classifier results of earlier `classify` stages: {name: {score, label, confidence}}. */
  classifiers: Record<string, { score: number; label: string; confidence: number }>;
  /** The caller's tenant id (caller.id when a tenant stage identified it). */
  tenant: string | null;
  /** The `model` field of the body (OpenAI-style requests). */
  model: string | null;
  /** Which phase is evaluated: `ingress` or `egress`. */
  phase: string;
}

/** `classifiers`: the results rules see (default: those of the request's classify stages). */
export function evaluationData(
  ctx: GatewayContext,
  mode: string,
  phase = 'ingress',
  classifiers: EvaluationData['classifiers'] = scoresOf(ctx.state.classifications),
): EvaluationData {
  const s = ctx.state;
  const body = s.json ?? null;
  const rpc = s.rpc;
  const params = rpc?.params;
  const call = rpc ? jsonrpcWire.toolCallOf(rpc) : undefined;
  return {
    method: rpc?.method ?? null,
    tool: call?.name ?? null,
    arguments: call ? call.arguments : null,
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
    body,
    annotations: s.annotations,
    classifiers,
    tenant: (s.caller?.attributes?.tenant as string | undefined) ?? s.caller?.id ?? null,
    model: isObject(body) && typeof body.model === 'string' ? body.model : null,
    phase,
  };
}

/** What rules see of classifier results (spans and latency stay out: rules decide on scores and labels). */
export function scoresOf(
  results: Record<string, { score: number; label: string; confidence: number }> | undefined,
): EvaluationData['classifiers'] {
  const out: EvaluationData['classifiers'] = {};
  for (const [name, r] of Object.entries(results ?? {})) {
    out[name] = { score: r.score, label: r.label, confidence: r.confidence };
  }
  return out;
}

/**
 * The hidden text classifiers decoded (ClassifierResult.evidence), for the decision's audit
 * record: at most 4 strings, undefined when there is none.
 */
export function evidenceOf(results: Record<string, { evidence?: string[] }> | undefined): string[] | undefined {
  const out: string[] = [];
  for (const r of Object.values(results ?? {})) {
    for (const e of r.evidence ?? []) if (out.length < 4 && !out.includes(e)) out.push(e);
  }
  return out.length > 0 ? out : undefined;
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
