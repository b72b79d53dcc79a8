/**
 * How the embedding service's stages appear in its OpenAPI description (the openapi plugin's
 * `openapi-document` merges these). Model names and chunking types are listed from the running
 * resources, so the document matches what the service accepts.
 */
import { describeStage, jsonResponse, ref } from '../openapi/api.ts';
import type { Chunker, EmbeddingModels } from './api.ts';
import { MAX_CHUNKING_SIZE, SEED_CHUNKING_TYPES } from './request.ts';
import { SEED_DEFAULTS, type SharedOptions } from './stage-options.ts';

/** The options a describer reads: the ones the three stages share (stage-options.ts). */
type Options = SharedOptions;

type Resource = <T = unknown>(name: string) => T;

function schemas(options: Options, resource: Resource, chunkerDefault?: string): Record<string, unknown> {
  const models = resource<EmbeddingModels>(options.models);
  const chunkerName = options.chunker ?? chunkerDefault;
  const types = chunkerName ? resource<Chunker>(chunkerName).types : SEED_CHUNKING_TYPES;
  const defaults = { ...SEED_DEFAULTS, ...options.defaults };
  const vector = { type: 'array', items: { type: 'number' } };
  return {
    Config: {
      type: 'object',
      additionalProperties: false,
      description: 'All fields optional; a field left out (or null) takes the default.',
      properties: {
        chunking_type: { type: 'string', enum: [...types], default: defaults.chunking_type },
        chunking_size: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_CHUNKING_SIZE,
          default: defaults.chunking_size,
          description: 'Words per chunk.',
        },
        embedding_model: { type: 'string', enum: models.names(), default: defaults.embedding_model },
      },
    },
    EmbedRequest: {
      type: 'object',
      additionalProperties: false,
      required: ['text'],
      properties: {
        text: { type: 'array', items: { type: 'string', minLength: 1 } },
        config: ref('Config'),
        input_type: {
          type: 'string',
          enum: ['passage', 'query'],
          default: 'passage',
          description: "Picks the model's prefix where it has one (E5 `query: `/`passage: `, Nomic, mxbai).",
        },
      },
    },
    ProcessRequest: {
      type: 'object',
      additionalProperties: false,
      required: ['url'],
      properties: { url: { type: 'string', format: 'uri' }, config: ref('Config') },
    },
    ProcessResult: {
      type: 'object',
      required: ['url', 'config', 'chunks', 'embeddings', 'error'],
      properties: {
        url: { type: 'string' },
        config: ref('Config'),
        chunks: {
          type: 'object',
          additionalProperties: { type: 'string' },
          description: 'Chunk index ("0", "1", ...) → text.',
        },
        embeddings: { type: 'object', additionalProperties: vector, description: 'Chunk index → vector.' },
        error: {
          type: ['string', 'null'],
          description: '`Failed to scrape content` when the URL could not be fetched.',
        },
      },
    },
    Params: {
      type: 'object',
      required: ['chunking_types', 'embedding_models'],
      properties: {
        chunking_types: { type: 'array', items: { type: 'string' } },
        embedding_models: { type: 'array', items: { type: 'string' } },
      },
    },
    Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
  };
}

const error = (description: string) => jsonResponse(description, ref('Error'));
const body = (name: string) => ({ required: true, content: { 'application/json': { schema: ref(name) } } });

describeStage('embed', (raw, ctx) => ({
  schemas: schemas(raw as Options, ctx.resource),
  operation: {
    tags: ['embedding'],
    summary: 'Embed texts',
    description: 'One vector per text, in order. Texts longer than the model’s token limit are truncated.',
    requestBody: body('EmbedRequest'),
    responses: {
      200: jsonResponse('The vectors', { type: 'array', items: { type: 'array', items: { type: 'number' } } }),
      400: error('Unsupported embedding model or chunking type, or an invalid body'),
      413: error('Too many texts, or a text too long'),
      500: error('Internal failure (the error message)'),
      503: error('The model is not installed in the models directory (the message says which files go where)'),
    },
  },
}));

describeStage('embed-process', (raw, ctx) => ({
  schemas: schemas(raw as Options, ctx.resource, 'chunker'),
  operation: {
    tags: ['embedding'],
    summary: 'Fetch a URL, chunk it and embed the chunks',
    description:
      'Cached by URL and config (`X-Cache: HIT` or `MISS`). A URL that cannot be fetched is still 200, with `error` set and empty maps.',
    requestBody: body('ProcessRequest'),
    responses: {
      200: {
        ...jsonResponse('The chunks and their vectors', ref('ProcessResult')),
        headers: { 'X-Cache': { schema: { type: 'string', enum: ['HIT', 'MISS'] } } },
      },
      400: error('Unsupported embedding model or chunking type, or an invalid body'),
      500: error('Internal failure (the error message)'),
      503: error('The model is not installed in the models directory'),
    },
  },
}));

describeStage('embed-params', (raw, ctx) => {
  const options = raw as Options & { view?: string };
  if (options.view === 'models') {
    return { operation: { tags: ['embedding'], summary: 'Model cards and their install status' } };
  }
  return {
    schemas: schemas(options, ctx.resource),
    operation: {
      tags: ['embedding'],
      summary: 'Chunking types and embedding models',
      responses: { 200: jsonResponse('What the service supports', ref('Params')) },
    },
  };
});
