/**
 * `embed` (POST /v1/embed): `{text: [..], config?, input_type?}` → one vector per text, in order.
 * `input_type` (`passage` by default, or `query`) picks the model's prefix where it has one
 * (E5, Nomic, mxbai); it is this service's addition to the seed's body.
 */
import { definePlugin, readJsonObject } from '../../runtime/index.ts';
import type { InputType } from './api.ts';
import { passThrough } from './errors.ts';
import { readInputType, readTexts, rejectUnknownFields, resolveConfig } from './request.ts';
import { type SharedOptions, sharedContext, sharedProperties } from './stage-options.ts';

interface EmbedStageOptions extends SharedOptions {
  max_texts?: number;
  max_text_chars?: number;
  input_type?: InputType;
}

export const EMBED_LIMITS = { maxTexts: 2048, maxTextChars: 100_000 };

export default definePlugin<EmbedStageOptions>({
  name: 'embed',
  description: 'POST /v1/embed of the embedding service: a list of texts → their vectors (terminal stage).',
  options: {
    type: 'object',
    additionalProperties: false,
    properties: {
      ...sharedProperties,
      max_texts: {
        type: 'integer',
        minimum: 1,
        default: EMBED_LIMITS.maxTexts,
        description: 'Texts per request (413 above).',
      },
      max_text_chars: {
        type: 'integer',
        minimum: 1,
        default: EMBED_LIMITS.maxTextChars,
        description: 'Characters per text (413 above); within it, texts are truncated to the model’s token limit.',
      },
      input_type: { enum: ['passage', 'query'], default: 'passage', description: 'Default input type.' },
    },
  },
  create(options, env) {
    const shared = sharedContext(options, env);
    const limits = {
      maxTexts: options.max_texts ?? EMBED_LIMITS.maxTexts,
      maxTextChars: options.max_text_chars ?? EMBED_LIMITS.maxTextChars,
    };
    return {
      async handle(ctx) {
        const body = await readJsonObject(ctx);
        rejectUnknownFields(body, ['text', 'config', 'input_type'], 'request');
        const config = resolveConfig(body.config, shared.defaults, shared.models, shared.chunkingTypes());
        const texts = readTexts(body.text, limits);
        const inputType = readInputType(body.input_type, options.input_type ?? 'passage');
        const vectors = await passThrough('Embedding failed', () =>
          shared.models.embed(config.embedding_model, texts, { inputType }),
        );
        ctx.status = 200;
        ctx.type = 'application/json';
        ctx.body = JSON.stringify(vectors);
      },
      describe: () => ({ ...limits, defaults: shared.defaults }),
    };
  },
});
