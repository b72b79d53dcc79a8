/**
 * AI client library (seed 002, "AI client configuration"): a configuration manager and an
 * OpenAI-compatible chat client that runs in the browser (bundle: scripts/build-ai-client.ts) and
 * in Node. This entry is platform-neutral; `node.ts` adds the file-backed storage.
 * It imports nothing from the gateway runtime. See docs/ai-client.md.
 */
export { buildTimeValues } from './build-env.ts';
export { CACHE_PREFIX, type CacheOptions, ResponseCache } from './cache.ts';
export type { ChatMessage, ChatOptions, ChatResult, FetchLike } from './chat.ts';
export { DEFAULT_TIMEOUT_MS } from './chat.ts';
export {
  type AIConfig,
  type AIConfigInput,
  BUILTIN_DEFAULTS,
  CONFIG_KEYS,
  DEFAULT_PROVIDER,
  mergeConfig,
} from './config.ts';
export {
  AIAbortError,
  AIClientError,
  AIConfigError,
  type AIErrorKind,
  AIHttpError,
  AINetworkError,
  AIResponseError,
  AITimeoutError,
} from './errors.ts';
export { getPresetConfigs, isCloudProvider, PRESET_NAMES, type PresetConfig } from './presets.ts';
export { REDACTED, redactConfig } from './redact.ts';
export {
  AIService,
  type AIServiceLogger,
  type AIServiceOptions,
  CONFIG_STORAGE_KEY,
  type StoredConfig,
} from './service.ts';
export { defaultStorage, MemoryStorage, type StorageAdapter, type WebStorageLike, webStorage } from './storage.ts';
export { type ConfigProblem, isHttpUrl, type ValidationResult, validateConfig } from './validate.ts';
