/**
 * Provider presets. The seed fixes temperature 0.7 everywhere, maxTokens 2000 except `hosted_c`
 * (4000) and `local`'s baseUrl; it leaves the other addresses and model ids out because they are
 * provider-specific. The values below are neutral stand-ins (`.example` hosts, RFC 2606): set the
 * real `baseUrl` and `model` in the config for a real hosted provider. See docs/ai-client.md.
 */
export interface PresetConfig {
  provider: string;
  baseUrl: string;
  model: string;
  maxTokens: number;
  temperature: number;
}

const PRESETS: Readonly<Record<string, Readonly<PresetConfig>>> = {
  hosted_a: {
    provider: 'hosted_a',
    baseUrl: 'https://api.hosted-a.example/v1',
    model: 'hosted-a-chat',
    maxTokens: 2000,
    temperature: 0.7,
  },
  hosted_b: {
    provider: 'hosted_b',
    baseUrl: 'https://api.hosted-b.example/v1',
    model: 'hosted-b-chat',
    maxTokens: 2000,
    temperature: 0.7,
  },
  hosted_c: {
    provider: 'hosted_c',
    baseUrl: 'https://api.hosted-c.example/v1',
    model: 'hosted-c-chat',
    maxTokens: 4000,
    temperature: 0.7,
  },
  local: {
    provider: 'local',
    baseUrl: 'http://localhost:11434/v1',
    model: 'llama3.2',
    maxTokens: 2000,
    temperature: 0.7,
  },
  hub: {
    provider: 'hub',
    baseUrl: 'https://hub.example/v1',
    model: 'hub-chat',
    maxTokens: 2000,
    temperature: 0.7,
  },
};

/** Providers whose endpoint is a hosted service: an apiKey is required there. */
const CLOUD = new Set(['hosted_a', 'hosted_b', 'hosted_c', 'hub']);

export const PRESET_NAMES = Object.keys(PRESETS);

/** A copy of every preset, by name (callers may change it freely). */
export function getPresetConfigs(): Record<string, PresetConfig> {
  return Object.fromEntries(Object.entries(PRESETS).map(([name, preset]) => [name, { ...preset }]));
}

/** The preset of a provider, or undefined for a custom provider string. */
export function presetFor(provider: string): PresetConfig | undefined {
  const preset = Object.hasOwn(PRESETS, provider) ? PRESETS[provider] : undefined;
  return preset ? { ...preset } : undefined;
}

export function isCloudProvider(provider: string): boolean {
  return CLOUD.has(provider);
}
