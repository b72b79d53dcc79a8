/**
 * Ends a request's server span with what the request turned out to be: the status, and the
 * GenAI or MCP semantic-convention attributes read from the request state the wire readers
 * already parsed (no body is parsed again here). Never records prompts, answers, tool arguments
 * or credentials: only names, ids, models and token counts.
 */
import { type Span, SpanStatusCode } from '@opentelemetry/api';
import type { GatewayContext } from '../state.ts';
import { mcpAttributes } from '../upstreams/traced.ts';

/** OpenAI-compatible endpoints and their `gen_ai.operation.name`. */
const genAiOperations: Array<[RegExp, string]> = [
  [/\/chat\/completions$/, 'chat'],
  [/\/completions$/, 'text_completion'],
  [/\/embeddings$/, 'embeddings'],
];

/** `failure`: the kind of the error the request core rendered, if it did (`error.type`). */
export function endServerSpan(span: Span, ctx: GatewayContext, failure?: string): void {
  const status = ctx.status;
  span.setAttribute('http.response.status_code', status);
  if (failure) span.setAttribute('error.type', failure);
  // A server span is an error only for 5xx (a 4xx is the client's; OpenTelemetry HTTP conventions).
  if (status >= 500) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    if (!failure) span.setAttribute('error.type', String(status));
  }
  const state = ctx.state;
  if (state.rpc) {
    span.setAttributes(mcpAttributes(state.rpc));
    const session = ctx.get('mcp-session-id') || ctx.response.get('mcp-session-id');
    if (session) span.setAttribute('mcp.session.id', session);
  } else if (ctx.method === 'POST' && state.json && typeof state.json === 'object') {
    genAiAttributes(span, ctx);
  }
  span.end();
}

function genAiAttributes(span: Span, ctx: GatewayContext): void {
  const operation = genAiOperations.find(([p]) => p.test(ctx.path))?.[1];
  if (!operation) return;
  const request = ctx.state.json as { model?: unknown };
  span.setAttributes({ 'gen_ai.operation.name': operation, 'gen_ai.provider.name': 'openai' });
  if (typeof request.model === 'string') span.setAttribute('gen_ai.request.model', request.model);
  // Usage and model of the answer, when a stage read it whole (a stream is not read here).
  const answer = ctx.state.answer?.readJson as
    | { model?: unknown; usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } }
    | undefined;
  if (!answer || typeof answer !== 'object') return;
  if (typeof answer.model === 'string') span.setAttribute('gen_ai.response.model', answer.model);
  const usage = answer.usage;
  if (typeof usage?.prompt_tokens === 'number') span.setAttribute('gen_ai.usage.input_tokens', usage.prompt_tokens);
  if (typeof usage?.completion_tokens === 'number')
    span.setAttribute('gen_ai.usage.output_tokens', usage.completion_tokens);
}
