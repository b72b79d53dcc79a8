/**
 * Keeping the API key out of logs, errors and storage.
 */
import type { AIConfig, AIConfigInput } from './config.ts';

export const REDACTED = '[redacted]';

/** A copy fit for logs: the key is replaced (an empty key stays empty, so "no key" is visible). */
export function redactConfig<T extends AIConfigInput | AIConfig>(config: T): T {
  if (!config.apiKey) return { ...config };
  return { ...config, apiKey: REDACTED };
}

/** The config without its key, for storage when the user did not ask to persist it. */
export function withoutApiKey(config: AIConfigInput): AIConfigInput {
  const { apiKey: _dropped, ...rest } = config;
  return rest;
}

/** Replaces every occurrence of the secret in a text (e.g. a provider's error message). */
export function scrubSecret(text: string, secret: string | undefined): string {
  if (!secret || secret.length < 4) return text;
  return text.split(secret).join(REDACTED);
}
