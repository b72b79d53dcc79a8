/**
 * Configuration check. It reports problems and never throws (seed 002: "no error is raised by the
 * configuration check itself"); a request made with a bad config fails later with a typed error.
 */
import type { AIConfigInput } from './config.ts';
import { isCloudProvider } from './presets.ts';

export interface ConfigProblem {
  field: keyof AIConfigInput;
  message: string;
}

export interface ValidationResult {
  valid: boolean;
  problems: ConfigProblem[];
}

export function validateConfig(config: AIConfigInput): ValidationResult {
  const problems: ConfigProblem[] = [];
  const problem = (field: keyof AIConfigInput, message: string) => problems.push({ field, message });

  const { provider, apiKey, model, baseUrl, maxTokens, temperature, systemPrompt } = config;
  if (provider !== undefined && (typeof provider !== 'string' || provider === '')) {
    problem('provider', 'provider must be a non-empty string');
  }
  if (apiKey !== undefined && typeof apiKey !== 'string') problem('apiKey', 'apiKey must be a string');
  else if (typeof provider === 'string' && isCloudProvider(provider) && !apiKey) {
    problem('apiKey', `apiKey is required for provider ${provider}`);
  }
  if (model !== undefined && typeof model !== 'string') problem('model', 'model must be a string');
  if (systemPrompt !== undefined && typeof systemPrompt !== 'string') {
    problem('systemPrompt', 'systemPrompt must be a string');
  }
  if (temperature !== undefined && !(typeof temperature === 'number' && temperature >= 0 && temperature <= 2)) {
    problem('temperature', 'temperature must be a number between 0 and 2');
  }
  if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && (maxTokens as number) > 0)) {
    problem('maxTokens', 'maxTokens must be a positive integer');
  }
  if (baseUrl !== undefined && !isHttpUrl(baseUrl)) problem('baseUrl', 'baseUrl must be a valid http(s) URL');
  return { valid: problems.length === 0, problems };
}

/** An absolute http: or https: URL (a chat endpoint is reached over HTTP only). */
export function isHttpUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}
