/**
 * jsonrpc-parse: reads the body as a JSON-RPC 2.0 message and puts it on `ctx.state.rpc`.
 * Malformed JSON → parse_error (-32700); valid JSON that is not a JSON-RPC request → invalid_rpc
 * (-32600) naming the field. Client *responses* (answers to server-initiated requests in MCP)
 * pass through unparsed. Bodyless methods (GET/DELETE of MCP's streamable HTTP) pass through.
 * In the answer phase it checks that a request got its response (expectRpcResponse).
 */
import {
  definePlugin,
  expectRpcResponse,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonRpcId,
  type JsonRpcRequest,
  type JsonSchema,
  type StageNext,
  syncStage,
  withJson,
} from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    allow_batch: {
      type: 'boolean',
      default: false,
      description: 'Batches are refused (-32600): MCP removed them, and per-message enforcement needs one message.',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'jsonrpc-parse',
  description: 'Parse the body as a JSON-RPC 2.0 request (errors -32700 / -32600).',
  provides: ['rpc', 'rpcKind'],
  options: optionsSchema,
  create() {
    // No async frame: the body is parsed at once when it came with the headers, and the answer
    // phase is one `then` on next() (docs/performance.md, "Work per request").
    return syncStage((ctx, next) => {
      if (ctx.method !== 'POST') return next();
      return withJson(ctx, (body) => checked(ctx, body, next));
    });
  },
});

/** The parsed body as a JSON-RPC message on the state, then the rest of the pipeline. */
function checked(ctx: GatewayContext, body: unknown, next: StageNext): ReturnType<StageNext> {
  if (Array.isArray(body)) throw invalid('Batch requests are not supported', '$');
  if (body === null || typeof body !== 'object') throw invalid('A JSON-RPC message must be an object', '$');
  const msg = body as Record<string, unknown>;
  if (msg.jsonrpc !== '2.0') throw invalid('"jsonrpc" must be "2.0"', '$.jsonrpc', msg.id);
  if (!('method' in msg) && ('result' in msg || 'error' in msg)) {
    ctx.state.rpcKind = 'response';
    return next();
  }
  if (typeof msg.method !== 'string' || msg.method === '') {
    throw invalid('"method" must be a non-empty string', '$.method', msg.id);
  }
  if ('id' in msg && !(typeof msg.id === 'string' || typeof msg.id === 'number' || msg.id === null)) {
    throw invalid('"id" must be a string, a number or null', '$.id');
  }
  if ('params' in msg && (msg.params === null || typeof msg.params !== 'object')) {
    throw invalid('"params" must be an object or an array', '$.params', msg.id);
  }
  ctx.state.rpc = msg as unknown as JsonRpcRequest;
  ctx.state.rpcKind = 'id' in msg ? 'request' : 'notification';
  if (!('id' in msg)) return next();
  // The answer phase: a request must be answered by its response, well formed; anything else
  // (not JSON, not JSON-RPC, another id, a stream that ends without it) is not passed unread.
  const id = msg.id as JsonRpcId;
  return next().then(() => expectRpcResponse(ctx, id));
}

function invalid(message: string, path: string, id?: unknown): GatewayError {
  // Echo the id when it is usable, so the client can match the error to its request.
  const rpcId = typeof id === 'string' || typeof id === 'number' ? id : null;
  return new GatewayError('invalid_rpc', message, { details: { path }, rpcId });
}
