/**
 * AIService: the configuration manager and chat client of seed 002.
 *
 * - `new AIService(config, options?)`, `updateConfig(partial)`, `getConfig()`, `getPresetConfigs()`,
 *   `validate()`, `chat(messages, options?)`.
 * - Layers, highest first: runtime updates, constructor config, stored config (`ext_config`),
 *   the provider's preset, built-in defaults (with the build-time `EXT_PROVIDER` / `EXT_API_KEY`).
 * - `updateConfig` persists what it is given into the stored layer, without the API key unless
 *   `persistApiKey: true`.
 */

import { type BuildTimeValues, buildTimeValues } from './build-env.ts';
import { type CacheOptions, ResponseCache } from './cache.ts';
import {
  type ChatMessage,
  type ChatOptions,
  type ChatResult,
  chatRequestBody,
  type FetchLike,
  requestChat,
} from './chat.ts';
import { type AIConfig, type AIConfigInput, mergeConfig, pickConfig } from './config.ts';
import { getPresetConfigs, type PresetConfig } from './presets.ts';
import { redactConfig, withoutApiKey } from './redact.ts';
import { defaultStorage, type StorageAdapter } from './storage.ts';
import { type ValidationResult, validateConfig } from './validate.ts';

export const CONFIG_STORAGE_KEY = 'ext_config';

/** What `ext_config` holds. */
export interface StoredConfig {
  version: 1;
  config: AIConfigInput;
}

export interface AIServiceLogger {
  debug?(message: string, fields?: Record<string, unknown>): void;
  warn?(message: string, fields?: Record<string, unknown>): void;
}

export interface AIServiceOptions {
  /** Default: the browser's localStorage, else an in-memory store. */
  storage?: StorageAdapter;
  /** Keep the API key in `ext_config` (default false: it is stripped before writing). */
  persistApiKey?: boolean;
  /** Response cache settings; `false` turns it off. */
  cache?: CacheOptions | false;
  /** Replaces the build-time values (`EXT_PROVIDER`, `EXT_API_KEY`); `{}` ignores them. */
  buildTime?: BuildTimeValues;
  /** Default request timeout, ms (60 000). */
  timeoutMs?: number;
  fetch?: FetchLike;
  /** Receives redacted fields only. */
  logger?: AIServiceLogger;
  /** Clock for cache expiry (tests). */
  now?: () => number;
}

export class AIService {
  readonly #storage: StorageAdapter;
  readonly #options: AIServiceOptions;
  readonly #constructed: AIConfigInput;
  readonly #buildTime: BuildTimeValues;
  readonly #cache: ResponseCache<Omit<ChatResult, 'cached'>> | undefined;
  #stored: AIConfigInput;
  #updates: AIConfigInput = {};
  #config: AIConfig;

  constructor(config: AIConfigInput = {}, options: AIServiceOptions = {}) {
    this.#options = options;
    this.#storage = options.storage ?? defaultStorage();
    this.#constructed = pickConfig(config);
    this.#buildTime = options.buildTime ?? buildTimeValues();
    this.#stored = this.#readStored();
    const cache = options.cache ?? {};
    this.#cache =
      cache === false || cache.enabled === false ? undefined : new ResponseCache(this.#storage, cache, options.now);
    this.#config = this.#merge();
  }

  /** The effective configuration (a copy). It holds the API key: log `redactConfig(...)` of it. */
  getConfig(): AIConfig {
    return { ...this.#config };
  }

  /**
   * Applies a runtime update (the highest layer) and persists it in the stored layer. Returns the
   * new effective configuration; problems are reported by `validate()`, never thrown.
   */
  updateConfig(partial: AIConfigInput): AIConfig {
    const update = pickConfig(partial);
    this.#updates = { ...this.#updates, ...update };
    this.#stored = { ...this.#stored, ...update };
    this.#writeStored();
    this.#config = this.#merge();
    this.#options.logger?.debug?.('ai-client config updated', { config: redactConfig(this.#config) });
    return this.getConfig();
  }

  /** Forgets the stored config (`ext_config`) and the runtime updates. */
  resetConfig(): AIConfig {
    this.#updates = {};
    this.#stored = {};
    this.#storage.removeItem(CONFIG_STORAGE_KEY);
    this.#config = this.#merge();
    return this.getConfig();
  }

  getPresetConfigs(): Record<string, PresetConfig> {
    return getPresetConfigs();
  }

  /** Checks the effective configuration: temperature 0..2, maxTokens a positive integer, baseUrl a URL... */
  validate(): ValidationResult {
    return validateConfig(this.#config);
  }

  /** One chat completion with the effective configuration. Throws `AIClientError`s. */
  async chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    const config = this.getConfig();
    const cache = options.cache === false ? undefined : this.#cache;
    let key: string | undefined;
    if (cache) {
      try {
        key = await cache.keyOf({ baseUrl: config.baseUrl, body: chatRequestBody(config, messages, options) });
        const hit = cache.get(key);
        if (hit) return { ...hit, cached: true };
      } catch (err) {
        // No Web Crypto (an insecure browser context) or an unreadable store: go without the cache.
        this.#options.logger?.warn?.('ai-client cache unavailable', { error: String(err) });
        key = undefined;
      }
    }
    const result = await requestChat(
      config,
      messages,
      { ...options, timeoutMs: options.timeoutMs ?? this.#options.timeoutMs },
      this.#options.fetch ?? ((url, init) => fetch(url, init)),
    );
    if (cache && key) {
      const { cached: _cached, ...value } = result;
      cache.set(key, value);
    }
    return result;
  }

  /** Removes the cached answers. */
  clearCache(): void {
    this.#cache?.clear();
  }

  cacheStats(): { entries: number; chars: number } {
    return this.#cache?.stats() ?? { entries: 0, chars: 0 };
  }

  #merge(): AIConfig {
    return mergeConfig({
      updates: this.#updates,
      constructed: this.#constructed,
      stored: this.#stored,
      buildTime: this.#buildTime,
    });
  }

  #readStored(): AIConfigInput {
    let text: string | null;
    try {
      text = this.#storage.getItem(CONFIG_STORAGE_KEY);
    } catch (err) {
      this.#options.logger?.warn?.('ai-client stored config unreadable', { error: String(err) });
      return {};
    }
    if (text === null) return {};
    try {
      const parsed = JSON.parse(text) as Partial<StoredConfig>;
      return pickConfig(parsed?.config);
    } catch {
      this.#options.logger?.warn?.('ai-client stored config is not JSON; ignored');
      return {};
    }
  }

  #writeStored(): void {
    const config = this.#options.persistApiKey ? this.#stored : withoutApiKey(this.#stored);
    const value: StoredConfig = { version: 1, config };
    try {
      this.#storage.setItem(CONFIG_STORAGE_KEY, JSON.stringify(value));
    } catch (err) {
      // A full or disabled store must not break the running session: the update still applies.
      this.#options.logger?.warn?.('ai-client config not persisted', { error: String(err) });
    }
  }
}
