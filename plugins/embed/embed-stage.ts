/**
 * `embed` (POST /v1/embed): `{text: [..], config?, input_type?}` → one vector per text, in order.
 * `input_type` (`passage` by default, or `query`) picks the model's prefix where it has one
 * (E5, Nomic, mxbai); it is this service's addition to the seed's body.
 */
import {
  definePlugin,
  type FromSchema,
  GatewayError,
  type JsonSchema,
  readJsonObject,
  respond,
} from '../../runtime/index.ts';
import { passThrough } from './errors.ts';
import { readInputType, readTexts, rejectUnknownFields, resolveConfig } from './request.ts';
import { sharedContext, sharedProperties } from './stage-options.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...sharedProperties,
    max_texts: {
      type: 'integer',
      minimum: 1,
      default: 2048,
      description: 'Texts per request (413 above).',
    },
    max_text_chars: {
      type: 'integer',
      minimum: 1,
      default: 100_000,
      description: 'Characters per text (413 above); within it, texts are truncated to the model’s token limit.',
    },
    max_total_chars: {
      type: 'integer',
      minimum: 1,
      default: 2_000_000,
      description: 'Characters of all texts of a request together (413 above): bounds the memory one request holds.',
    },
    max_inflight_chars: {
      type: 'integer',
      minimum: 1,
      default: 8_000_000,
      description:
        'Characters of all requests being embedded at once (503 overloaded, Retry-After: 1, above): bounds the memory of a burst.',
    },
    input_type: { enum: ['passage', 'query'], default: 'passage', description: 'Default input type.' },
  },
} as const satisfies JsonSchema;
type EmbedStageOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<EmbedStageOptions>({
  name: 'embed',
  description: 'POST /v1/embed of the embedding service: a list of texts → their vectors (terminal stage).',
  options: optionsSchema,
  create(options, env) {
    const shared = sharedContext(options, env);
    const limits = {
      maxTexts: options.max_texts,
      maxTextChars: options.max_text_chars,
      maxTotalChars: options.max_total_chars,
    };
    const maxInflight = options.max_inflight_chars;
    let inflight = 0;
    return {
      async handle(ctx) {
        const body = await readJsonObject(ctx);
        rejectUnknownFields(body, ['text', 'config', 'input_type'], 'request');
        const config = resolveConfig(body.config, shared.defaults, shared.models, shared.chunkingTypes());
        const texts = readTexts(body.text, limits);
        const inputType = readInputType(body.input_type, options.input_type);
        const chars = texts.reduce((sum, text) => sum + text.length, 0);
        // A request alone within max_total_chars always gets in when nothing else runs.
        if (inflight > 0 && inflight + chars > maxInflight) {
          throw new GatewayError(
            'overloaded',
            `The service is embedding ${inflight} characters already; the limit (max_inflight_chars) is ${maxInflight}: retry shortly`,
            { headers: { 'Retry-After': '1' } },
          );
        }
        inflight += chars;
        let vectors: number[][];
        try {
          vectors = await passThrough('Embedding failed', () =>
            shared.models.embed(config.embedding_model, texts, { inputType }),
          );
        } finally {
          inflight -= chars;
        }
        respond(ctx, JSON.stringify(vectors), { type: 'application/json' });
      },
      describe: () => ({
        ...limits,
        maxInflightChars: maxInflight,
        inflightChars: inflight,
        defaults: shared.defaults,
      }),
    };
  },
});
