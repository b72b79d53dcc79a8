/**
 * chunk: the `chunker` resource. Splits text for the embedding service (seed 001): `words`
 * (fixed number of words per chunk) and two types that ask a language model, `llm-concept` and
 * `llm-introspection`, reached through the AI client library (lib/ai-client) at any
 * OpenAI-compatible address. See docs/chunking.md; the value's type is in api.ts.
 */
import { AIService, MemoryStorage, redactConfig } from '../../lib/ai-client/index.ts';
import { defineResource, type FromSchema, GatewayError, type JsonSchema, latencyBuckets } from '../../runtime/index.ts';
import { CHUNKING_TYPES, type Chunker, type ChunkOptions } from './api.ts';
import { conceptStrategy } from './concept.ts';
import { introspectionStrategy } from './introspection.ts';
import { chunkWithLlm, LlmCaller, type LlmSettings, type Strategy } from './llm.ts';
import { chunkWords } from './words.ts';

const strategies: Record<string, Strategy> = {
  'llm-concept': conceptStrategy,
  'llm-introspection': introspectionStrategy,
};

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    types: {
      type: 'array',
      items: { enum: [...CHUNKING_TYPES] },
      uniqueItems: true,
      minItems: 1,
      default: [...CHUNKING_TYPES],
      description: 'Chunking types offered (default all). Without an LLM type no model is needed.',
    },
    llm: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'The language model of the LLM types: any OpenAI-compatible chat completions endpoint.',
      properties: {
        provider: {
          type: 'string',
          default: 'local',
          description: 'AI client preset (hosted_a, hosted_b, hosted_c, local, hub) or a custom name.',
        },
        base_url: { type: 'string', description: 'Endpoint, e.g. http://localhost:11434/v1 (default: the preset).' },
        model: { type: 'string', description: 'Model id (default: the preset).' },
        api_key: { type: 'string', description: 'Bearer key; use ${VAR}, never a literal.' },
        temperature: { type: 'number', minimum: 0, maximum: 2, default: 0 },
        max_tokens: { type: 'integer', minimum: 1, default: 4096, description: 'Answer budget per window.' },
        timeout_ms: { type: 'integer', minimum: 1, default: 60000, description: 'Per model request.' },
        json_mode: { type: 'boolean', default: true, description: 'Send response_format json_object.' },
      },
    },
    window_words: {
      type: 'integer',
      minimum: 50,
      maximum: 3000,
      default: 1000,
      description: 'Words sent to the model at once; llm-concept answers about as much again.',
    },
    max_windows: {
      type: 'integer',
      minimum: 1,
      default: 20,
      description: 'Model requests per text at most; the rest of a longer text is chunked by words.',
    },
    include_titles: {
      type: 'boolean',
      default: false,
      description: 'llm-introspection: start each chunk with its title and a blank line.',
    },
    fallback_on_error: {
      type: 'boolean',
      default: true,
      description: 'When the model cannot be reached, chunk by words (true) or fail with 502/504 (false).',
    },
  },
} as const satisfies JsonSchema;

type Options = FromSchema<typeof optionsSchema>;

export default defineResource<Options, Chunker>({
  type: 'chunker',
  description: 'Splits text into chunks: by words, or by concepts / sections found by a language model.',
  options: optionsSchema,
  create(options, env) {
    const types = CHUNKING_TYPES.filter((t) => options.types.includes(t));
    const llmOptions = options.llm;
    const ai = new AIService(
      {
        provider: llmOptions.provider,
        ...(llmOptions.base_url ? { baseUrl: llmOptions.base_url } : {}),
        ...(llmOptions.model ? { model: llmOptions.model } : {}),
        ...(llmOptions.api_key ? { apiKey: llmOptions.api_key } : {}),
        temperature: llmOptions.temperature,
        maxTokens: llmOptions.max_tokens,
      },
      // A server-side client: nothing persisted, no response cache, no browser build-time values.
      { storage: new MemoryStorage(), cache: false, buildTime: {} },
    );
    const usesLlm = types.some((t) => t in strategies);
    if (usesLlm) {
      const { problems } = ai.validate();
      if (problems.length > 0) throw new Error(`chunker llm: ${problems.map((p) => p.message).join('; ')}`);
    }

    const fallbacks = env.metrics.counter({
      name: 'switchyard_chunk_fallbacks_total',
      help: 'Windows of text chunked by words because the model answer was unusable, by type and reason',
      labelNames: ['type', 'reason'] as const,
    });
    const llmRequests = env.metrics.counter({
      name: 'switchyard_chunk_llm_requests_total',
      help: 'Chunking model requests, by type and outcome (ok, unusable, failed)',
      labelNames: ['type', 'outcome'] as const,
    });
    const llmDuration = env.metrics.histogram({
      name: 'switchyard_chunk_llm_duration_seconds',
      help: 'Duration of chunking model requests, by type',
      labelNames: ['type'] as const,
      buckets: latencyBuckets,
    });
    const llm = new LlmCaller(
      ai,
      {
        fallbackOnError: options.fallback_on_error,
        timeoutMs: llmOptions.timeout_ms,
        jsonMode: llmOptions.json_mode,
      },
      {
        onFallback(type, reason, window) {
          fallbacks.inc({ type, reason });
          // Sizes only: the text is the user's content.
          env.logger.warn(
            { chunking_type: type, reason, window_words: window.words, window_chars: window.chars },
            'chunking model answer unusable; chunked by words',
          );
        },
        onLlmCall(type, outcome, seconds) {
          llmRequests.inc({ type, outcome });
          llmDuration.observe({ type }, seconds);
        },
      },
    );
    const settings: LlmSettings = {
      windowWords: options.window_words,
      maxWindows: options.max_windows,
      includeTitles: options.include_titles,
    };

    const chunker: Chunker = {
      types: [...types],
      async chunk(text: string, { type, size }: ChunkOptions): Promise<string[]> {
        if (!(types as string[]).includes(type))
          throw new GatewayError('bad_request', `Unsupported chunking type: ${type}`);
        if (!Number.isInteger(size) || size < 1) {
          throw new GatewayError('bad_request', 'Chunking size must be a positive integer', { details: { size } });
        }
        if (typeof text !== 'string') throw new GatewayError('bad_request', 'Text to chunk must be a string');
        const strategy = strategies[type];
        return strategy ? chunkWithLlm(text, size, strategy, llm, settings) : chunkWords(text, size);
      },
    };
    const { provider, model, baseUrl } = redactConfig(ai.getConfig());
    const describe = () => ({ types: [...types], ...(usesLlm ? { llm: { provider, model, base_url: baseUrl } } : {}) });
    return {
      value: chunker,
      health: () => ({ ok: true, status: 'ready', detail: describe() }),
      describe,
    };
  },
});
