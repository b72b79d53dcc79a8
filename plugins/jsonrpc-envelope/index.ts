/**
 * jsonrpc-envelope: a typed direct send. The body `{type, tool, arguments, metadata}` becomes a
 * JSON-RPC request on `ctx.state.rpc` (so the same enforcement stages run on it), and the
 * upstream's JSON-RPC answer becomes `{content, metadata: {stype, qom_score, schema_valid,
 * request_id}}`. `metadata.stype` and `metadata.qom_profile` override resolution per request;
 * `metadata.explain: true` adds the QoM breakdown.
 */
import {
  type Answer,
  answerOf,
  definePlugin,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type RpcMessage,
  readRpcResponse,
  requestOf,
  type StageAnswer,
  type StageNext,
  syncStage,
  withJsonObject,
} from '../../runtime/index.ts';
import type { RequestedTyping } from '../stype-registry/api.ts';

interface ContentItem {
  type: string;
  text?: string;
  [key: string]: unknown;
}

export default definePlugin({
  name: 'jsonrpc-envelope',
  description: 'Wrap a typed {type, tool, arguments, metadata} body into JSON-RPC and unwrap the answer.',
  // stype, qom and validation are read after next(), from the stages behind it: not needs.
  provides: ['rpc', 'rpcKind', 'requested'],
  options: { type: 'object', additionalProperties: false, properties: {} },
  create() {
    // No async frame: the body is parsed at once when it came with the headers (docs/performance.md).
    return syncStage((ctx, next) => withJsonObject(ctx, (body) => enveloped(ctx, body, next)));
  },
});

/** The envelope's fields checked, the JSON-RPC request made of them, then the rest of the pipeline. */
function enveloped(ctx: GatewayContext, body: Record<string, unknown>, next: StageNext): ReturnType<StageNext> {
  const { type, tool, arguments: args, metadata } = body;
  if (typeof type !== 'string' || type === '') throw field('type', 'is required and must be a non-empty string');
  if (type === 'tools/call' && (typeof tool !== 'string' || tool === '')) {
    throw field('tool', 'is required when type is tools/call');
  }
  if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
    throw field('arguments', 'must be an object');
  }
  if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
    throw field('metadata', 'must be an object');
  }
  const meta = (metadata ?? {}) as Record<string, unknown>;
  for (const key of ['stype', 'qom_profile'] as const) {
    if (meta[key] !== undefined && typeof meta[key] !== 'string') throw field(`metadata.${key}`, 'must be a string');
  }
  const requested: RequestedTyping = {};
  if (typeof meta.stype === 'string') requested.stype = meta.stype;
  if (typeof meta.qom_profile === 'string') requested.qomProfile = meta.qom_profile;
  if (meta.explain === true) requested.explain = true;
  ctx.state.requested = requested;

  const params = type === 'tools/call' ? { name: tool, arguments: args ?? {} } : ((args ?? {}) as object);
  // The message that goes upstream instead of the envelope.
  requestOf(ctx).setRpc({ jsonrpc: '2.0', id: ctx.state.requestId, method: type, params } as JsonRpcRequest);
  ctx.state.rpcKind = 'request'; // always answered: the typed result comes from its response

  // The answer phase, one `then` on next() (docs/performance.md, "Work per request"); the
  // answer bound to this stage (the store itself when a test calls the stage with its own next).
  return next().then((handle) => {
    const answer = handle ?? answerOf(ctx);
    const response = readRpcResponse(ctx, answer);
    return response instanceof Promise
      ? response.then((read) => typedResult(ctx, answer, read))
      : typedResult(ctx, answer, response);
  });
}

/** The upstream's JSON-RPC response becomes the typed result. */
function typedResult(ctx: GatewayContext, answer: StageAnswer | Answer, response: RpcMessage | undefined): void {
  if (!response) throw new GatewayError('upstream_error', 'Upstream returned no JSON-RPC response');
  if (response.error) throw fromRpcError(response.error as { code?: number; message?: string; data?: unknown });
  const result = (response.result ?? {}) as Record<string, unknown>;
  const s = ctx.state;
  answer.status = 200;
  answer.setJson({
    content: toContent(result),
    metadata: {
      stype: s.stype?.id ?? null,
      qom_score: s.qom?.score ?? null,
      schema_valid: s.validation?.valid ?? null,
      request_id: s.requestId,
      ...(result.isError === true ? { is_error: true } : {}),
      ...(s.requested?.explain && s.qom
        ? {
            qom: {
              profile: s.qom.profile,
              threshold: s.qom.threshold,
              dimensions: s.qom.dimensions,
              explanation: s.qom.explanation,
            },
          }
        : {}),
    },
  });
}

function field(name: string, problem: string): GatewayError {
  return new GatewayError('bad_request', `"${name}" ${problem}`, { details: { field: name } });
}

/** Upstream JSON-RPC errors: unknown method → 404, bad params → 400, anything else → 502. */
function fromRpcError(e: { code?: number; message?: string; data?: unknown }): GatewayError {
  const details = { upstream_code: e.code, upstream_message: e.message };
  if (e.code === -32601) return new GatewayError('not_found', e.message ?? 'Method not found', { details });
  if (e.code === -32602) return new GatewayError('bad_request', e.message ?? 'Invalid params', { details });
  return new GatewayError('upstream_error', e.message ?? 'Upstream error', { details });
}

/** MCP results carry `content`; resources carry `contents`; anything else is shown as JSON text. */
function toContent(result: Record<string, unknown>): ContentItem[] {
  if (Array.isArray(result.content)) return result.content as ContentItem[];
  if (Array.isArray(result.contents)) {
    return (result.contents as Array<Record<string, unknown>>).map((c) => ({
      type: c.text !== undefined ? 'text' : 'blob',
      ...c,
    })) as ContentItem[];
  }
  return [{ type: 'text', text: JSON.stringify(result) }];
}
