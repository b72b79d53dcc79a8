/**
 * The configuration object and how its sources are merged.
 *
 * Priority, highest first (seed 002, "Versioning"): runtime updates (`updateConfig`), the
 * constructor config, the stored config, the provider preset, built-in defaults. The provider
 * itself is picked from the same layers first, because it decides which preset applies.
 */
import { presetFor } from './presets.ts';

export interface AIConfig {
  /** A preset name (`hosted_a`, `hosted_b`, `hosted_c`, `local`, `hub`) or any custom string. */
  provider: string;
  apiKey: string;
  model: string;
  baseUrl: string;
  maxTokens: number;
  temperature: number;
  /** Prepended as a system message to every request when not empty. */
  systemPrompt: string;
}

/** What callers and storage give: any subset; values are checked by `validateConfig`, not here. */
export type AIConfigInput = Partial<AIConfig>;

export const CONFIG_KEYS = [
  'provider',
  'apiKey',
  'model',
  'baseUrl',
  'maxTokens',
  'temperature',
  'systemPrompt',
] as const satisfies readonly (keyof AIConfig)[];

export const DEFAULT_PROVIDER = 'hosted_b';

/** Built-in defaults (the lowest layer). `model` and `baseUrl` have no neutral default. */
export const BUILTIN_DEFAULTS: AIConfig = {
  provider: DEFAULT_PROVIDER,
  apiKey: '',
  model: '',
  baseUrl: '',
  maxTokens: 2000,
  temperature: 0.7,
  systemPrompt: '',
};

export interface ConfigLayers {
  updates?: AIConfigInput;
  constructed?: AIConfigInput;
  stored?: AIConfigInput;
  /** Build-time values (`EXT_PROVIDER`, `EXT_API_KEY`): they replace the built-in defaults. */
  buildTime?: { provider?: string; apiKey?: string };
}

/** Keeps the known keys whose value is not undefined: `{model: undefined}` does not erase a lower layer. */
export function pickConfig(input: unknown): AIConfigInput {
  const out: Record<string, unknown> = {};
  if (typeof input !== 'object' || input === null) return out;
  for (const key of CONFIG_KEYS) {
    const value = (input as Record<string, unknown>)[key];
    if (value !== undefined) out[key] = value;
  }
  return out as AIConfigInput;
}

/** The effective configuration. */
export function mergeConfig(layers: ConfigLayers): AIConfig {
  const defaults: AIConfig = {
    ...BUILTIN_DEFAULTS,
    // An empty build-time variable counts as unset.
    ...(layers.buildTime?.provider ? { provider: layers.buildTime.provider } : {}),
    ...(layers.buildTime?.apiKey ? { apiKey: layers.buildTime.apiKey } : {}),
  };
  const updates = pickConfig(layers.updates);
  const constructed = pickConfig(layers.constructed);
  const stored = pickConfig(layers.stored);
  const provider = updates.provider ?? constructed.provider ?? stored.provider ?? defaults.provider;
  const preset = presetFor(provider);
  return { ...defaults, ...preset, provider, ...stored, ...constructed, ...updates } as AIConfig;
}
