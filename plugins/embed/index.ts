/**
 * embed: the embedding service's parts (seed 001). The `embedding-models` resource (ONNX text
 * embedding models by the seed's names, model-cards.ts) and three terminal stages: `embed`
 * (POST /v1/embed), `embed-process` (POST /v1/process: fetch, chunk, embed, cache) and
 * `embed-params` (GET /v1/params). Contract for other plugins: api.ts. See docs/embedding.md.
 */
import './openapi.ts';
import embed from './embed-stage.ts';
import models from './models-resource.ts';
import params from './params-stage.ts';
import process from './process-stage.ts';

export default [models, embed, process, params];
