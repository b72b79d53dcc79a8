/**
 * `embed-params` (GET /v1/params): the chunking types (the chunker resource's) and every
 * embedding model name, installed or not, as the seed lists them. With `view: models` it answers
 * the model cards with each model's status instead (missing, installed, loading, loaded, error),
 * for operators.
 */
import { definePlugin, type FromSchema, type JsonSchema, respond } from '../../runtime/index.ts';
import { sharedContext, sharedProperties } from './stage-options.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...sharedProperties,
    view: { enum: ['params', 'models'], default: 'params' },
  },
} as const satisfies JsonSchema;
type ParamsOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ParamsOptions>({
  name: 'embed-params',
  description: 'GET /v1/params of the embedding service (chunking types and model names), or the model cards.',
  options: optionsSchema,
  create(options, env) {
    const shared = sharedContext(options, env);
    return async (ctx) => {
      if (options.view === 'models') {
        respond(ctx, {
          default_model: shared.defaults.embedding_model,
          models: shared.models.names().map((name) => ({ ...shared.models.card(name), ...shared.models.status(name) })),
        });
        return;
      }
      respond(ctx, { chunking_types: [...shared.chunkingTypes()], embedding_models: shared.models.names() });
    };
  },
});
