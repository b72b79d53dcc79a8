/** Options the embedding service's stages share: which resources they use and the Config defaults. */
import type { FromSchema, JsonSchema, PluginEnv } from '../../runtime/index.ts';
import type { Chunker, EmbeddingModels } from './api.ts';
import { DEFAULT_MODEL } from './model-cards.ts';
import { type EmbedConfig, SEED_CHUNKING_TYPES } from './request.ts';

/** The seed's Config defaults. */
export const SEED_DEFAULTS: EmbedConfig = {
  chunking_type: 'words',
  chunking_size: 512,
  embedding_model: DEFAULT_MODEL,
};

export const sharedProperties = {
  models: { type: 'string', default: 'models', description: 'The embedding-models resource.' },
  chunker: {
    type: 'string',
    description: 'The chunker resource (its `types` are the chunking types); without one, the seed’s three types.',
  },
  defaults: {
    type: 'object',
    additionalProperties: false,
    description: 'Config used for fields a request leaves out (default: words, 512, BGESmallENV15).',
    properties: {
      chunking_type: { type: 'string' },
      chunking_size: { type: 'integer', minimum: 1 },
      embedding_model: { type: 'string' },
    },
  },
} as const satisfies Record<string, JsonSchema>;

/** The shared options, defaults applied (each stage's options type includes them). */
export type SharedOptions = FromSchema<{ type: 'object'; properties: typeof sharedProperties }>;

export interface SharedContext {
  models: EmbeddingModels;
  chunker: Chunker | undefined;
  chunkingTypes(): readonly string[];
  defaults: EmbedConfig;
}

export function sharedContext(options: SharedOptions, env: PluginEnv): SharedContext {
  const models = env.resource<EmbeddingModels>(options.models);
  const chunker = options.chunker ? env.resource<Chunker>(options.chunker) : undefined;
  const defaults = { ...SEED_DEFAULTS, ...options.defaults };
  if (!models.card(defaults.embedding_model)) {
    throw new Error(
      `defaults.embedding_model "${defaults.embedding_model}" is not a model of resource "${options.models}"`,
    );
  }
  return { models, chunker, chunkingTypes: () => chunker?.types ?? SEED_CHUNKING_TYPES, defaults };
}
