/**
 * Reading the embedding service's request bodies: the seed's Config (chunking_type,
 * chunking_size, embedding_model, all optional, defaults filled in), the `text` list and the
 * `url`. Every problem is a GatewayError with a message that says what to change; the seed's two
 * messages (`Unsupported embedding model: <name>`, `Unsupported chunking type: <name>`) are kept
 * word for word.
 */
import { GatewayError } from '../../runtime/index.ts';
import type { EmbeddingModels, InputType } from './api.ts';

export interface EmbedConfig {
  chunking_type: string;
  chunking_size: number;
  embedding_model: string;
}

export const CONFIG_FIELDS = ['chunking_type', 'chunking_size', 'embedding_model'] as const;
/** The seed's chunking types, for a service without a chunker resource. */
export const SEED_CHUNKING_TYPES = ['words', 'llm-concept', 'llm-introspection'];
export const MAX_CHUNKING_SIZE = 100_000;

export interface TextLimits {
  maxTexts: number;
  maxTextChars: number;
  /** All texts of a request together, in characters. */
  maxTotalChars: number;
}

const bad = (message: string) => new GatewayError('bad_request', message);

/** Fields of `body` other than `allowed` → 400 naming them. */
export function rejectUnknownFields(body: Record<string, unknown>, allowed: readonly string[], what: string): void {
  const unknown = Object.keys(body).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    throw bad(
      `Unknown ${what} field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')} (allowed: ${allowed.join(', ')})`,
    );
  }
}

/** The request's config with defaults filled in; `null` or an absent field means the default. */
export function resolveConfig(
  raw: unknown,
  defaults: EmbedConfig,
  models: EmbeddingModels,
  chunkingTypes: readonly string[],
): EmbedConfig {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw bad('config must be an object');
  const config = raw as Record<string, unknown>;
  rejectUnknownFields(config, CONFIG_FIELDS, 'config');

  const model = config.embedding_model ?? defaults.embedding_model;
  if (typeof model !== 'string') throw bad('config.embedding_model must be a string');
  if (!models.card(model)) throw bad(`Unsupported embedding model: ${model}`);

  const type = config.chunking_type ?? defaults.chunking_type;
  if (typeof type !== 'string') throw bad('config.chunking_type must be a string');
  if (!chunkingTypes.includes(type)) throw bad(`Unsupported chunking type: ${type}`);

  const size = config.chunking_size ?? defaults.chunking_size;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > MAX_CHUNKING_SIZE) {
    throw bad(`config.chunking_size must be an integer from 1 to ${MAX_CHUNKING_SIZE} (words per chunk)`);
  }
  return { chunking_type: type, chunking_size: size, embedding_model: model };
}

/** The `text` field: a list of non-empty strings within the limits. */
export function readTexts(value: unknown, limits: TextLimits): string[] {
  if (value === undefined) throw bad('text is required: an array of strings');
  if (!Array.isArray(value)) throw bad('text must be an array of strings');
  if (value.length > limits.maxTexts) {
    throw new GatewayError(
      'payload_too_large',
      `text has ${value.length} items; the limit (max_texts) is ${limits.maxTexts} per request`,
    );
  }
  let total = 0;
  value.forEach((item, i) => {
    if (typeof item !== 'string') throw bad(`text[${i}] must be a string`);
    if (item.trim() === '') throw bad(`text[${i}] is empty`);
    if (item.length > limits.maxTextChars) {
      throw new GatewayError(
        'payload_too_large',
        `text[${i}] has ${item.length} characters; the limit (max_text_chars) is ${limits.maxTextChars} per text ` +
          "(texts are truncated to the model's token limit anyway)",
      );
    }
    total += item.length;
  });
  if (total > limits.maxTotalChars) {
    throw new GatewayError(
      'payload_too_large',
      `text has ${total} characters in all; the limit (max_total_chars) is ${limits.maxTotalChars} per request: send fewer or shorter texts per request`,
    );
  }
  return value as string[];
}

export function readInputType(value: unknown, fallback: InputType): InputType {
  if (value === undefined || value === null) return fallback;
  if (value !== 'query' && value !== 'passage') throw bad('input_type must be "query" or "passage"');
  return value;
}

export const MAX_URL_LENGTH = 8192;

/** The `url` field: an absolute http(s) URL. */
export function readUrl(value: unknown): string {
  if (value === undefined) throw bad('url is required');
  if (typeof value !== 'string') throw bad('url must be a string');
  if (value.length > MAX_URL_LENGTH) throw bad(`url is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad(`url is not a valid URL: ${value.slice(0, 200)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad('url must be an http or https URL');
  return value;
}
