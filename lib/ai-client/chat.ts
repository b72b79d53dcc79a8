/**
 * One chat completion against an OpenAI-compatible endpoint: `POST {baseUrl}/chat/completions`
 * with `Authorization: Bearer <apiKey>`, the systemPrompt prepended as a system message,
 * `max_tokens` and `temperature`. Not streamed: callers here want the whole answer.
 */
import type { AIConfig } from './config.ts';
import {
  AIAbortError,
  AIClientError,
  AIConfigError,
  AIHttpError,
  AINetworkError,
  AIResponseError,
  AITimeoutError,
} from './errors.ts';
import { scrubSecret } from './redact.ts';
import { isHttpUrl } from './validate.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatOptions {
  signal?: AbortSignal;
  /** Whole-request timeout (default 60 000 ms). */
  timeoutMs?: number;
  /** Per-request overrides of the config. */
  maxTokens?: number;
  temperature?: number;
  /** `json_object` asks for OpenAI's JSON mode (`response_format`); providers without it ignore it. */
  responseFormat?: 'text' | 'json_object';
  /** Use the response cache (default true when the service has one). */
  cache?: boolean;
}

export interface ChatResult {
  content: string;
  model: string;
  finishReason: string | null;
  usage?: { promptTokens?: number; completionTokens?: number; totalTokens?: number };
  /** True when the answer came from the response cache. */
  cached: boolean;
}

export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

export const DEFAULT_TIMEOUT_MS = 60_000;

/** The request body: also the material of the cache key (without the key or the address's secrets). */
export function chatRequestBody(config: AIConfig, messages: ChatMessage[], options: ChatOptions = {}) {
  const all: ChatMessage[] = config.systemPrompt
    ? [{ role: 'system', content: config.systemPrompt }, ...messages]
    : [...messages];
  return {
    model: config.model,
    messages: all,
    max_tokens: options.maxTokens ?? config.maxTokens,
    temperature: options.temperature ?? config.temperature,
    ...(options.responseFormat === 'json_object' ? { response_format: { type: 'json_object' } } : {}),
  };
}

export function chatUrl(config: AIConfig): string {
  if (!isHttpUrl(config.baseUrl)) throw new AIConfigError('baseUrl is not a valid http(s) URL');
  return `${config.baseUrl.replace(/\/+$/, '')}/chat/completions`;
}

export async function requestChat(
  config: AIConfig,
  messages: ChatMessage[],
  options: ChatOptions,
  fetchImpl: FetchLike,
): Promise<ChatResult> {
  if (!config.model) throw new AIConfigError('model is not set');
  const url = chatUrl(config);
  const body = chatRequestBody(config, messages, options);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (config.apiKey) headers.authorization = `Bearer ${config.apiKey}`;

  try {
    const response = await fetchImpl(url, { method: 'POST', headers, body: JSON.stringify(body), signal });
    // The body is read under the same signal: a provider that stalls mid-answer also times out.
    const text = await response.text();
    if (!response.ok) throw httpError(response, text, config.apiKey);
    return parseCompletion(text, body.model);
  } catch (err) {
    if (err instanceof AIClientError) throw err;
    if (options.signal?.aborted) throw new AIAbortError(options.signal.reason);
    if (timeout.aborted) throw new AITimeoutError(timeoutMs);
    const reason = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    throw new AINetworkError(
      `Provider unreachable at ${new URL(url).origin}: ${scrubSecret(reason, config.apiKey)}`,
      err,
    );
  }
}

function httpError(response: Response, text: string, apiKey: string): AIHttpError {
  let providerMessage = '';
  let type: string | undefined;
  let code: string | undefined;
  try {
    // OpenAI's shape {error: {message, type, code}}; some servers send {error: "text"} or {message}.
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown };
    const error = parsed.error;
    if (typeof error === 'string') providerMessage = error;
    else if (typeof error === 'object' && error !== null) {
      const e = error as { message?: unknown; type?: unknown; code?: unknown };
      if (typeof e.message === 'string') providerMessage = e.message;
      if (typeof e.type === 'string') type = e.type;
      if (typeof e.code === 'string') code = e.code;
    } else if (typeof parsed.message === 'string') providerMessage = parsed.message;
  } catch {
    providerMessage = text.slice(0, 200);
  }
  const retryAfter = Number(response.headers.get('retry-after'));
  const message = `Provider answered HTTP ${response.status}${providerMessage ? `: ${providerMessage}` : ''}`;
  return new AIHttpError(response.status, scrubSecret(message, apiKey), {
    type,
    code,
    retryAfterSeconds:
      Number.isFinite(retryAfter) && retryAfter >= 0 && response.headers.has('retry-after') ? retryAfter : undefined,
  });
}

function parseCompletion(text: string, requestedModel: string): ChatResult {
  let parsed: {
    model?: unknown;
    choices?: Array<{ message?: { content?: unknown }; finish_reason?: unknown }>;
    usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
  };
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AIResponseError('The provider answered with something that is not JSON');
  }
  const choice = Array.isArray(parsed?.choices) ? parsed.choices[0] : undefined;
  const content = choice?.message?.content;
  if (typeof content !== 'string') throw new AIResponseError('The provider answered without a message text');
  return {
    content,
    model: typeof parsed.model === 'string' ? parsed.model : requestedModel,
    finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
    usage: parsed.usage
      ? {
          promptTokens: parsed.usage.prompt_tokens,
          completionTokens: parsed.usage.completion_tokens,
          totalTokens: parsed.usage.total_tokens,
        }
      : undefined,
    cached: false,
  };
}
