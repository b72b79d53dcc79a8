/**
 * The `embedding-models` resource: every model of the cards (model-cards.ts, plus the service's
 * own under `models:`), loaded on first use from the models directory, then kept. Nothing is
 * fetched from the network: a model whose files are absent answers 503 with the files to put
 * where, and loads as soon as they are there (no restart).
 */
import {
  defineResource,
  type FromSchema,
  GatewayError,
  type HealthReport,
  type JsonSchema,
  latencyBuckets,
} from '../../runtime/index.ts';
import type { EmbeddingModels, EmbedOptions, ModelCard, ModelStatus } from './api.ts';
import { EmbeddingModel } from './embedding-model.ts';
import { buildCards, type CardOverride as CardChange } from './model-cards.ts';
import { locateModel, modelDir, notInstalledMessage } from './model-files.ts';

const cardOverrideSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    model: { type: 'string', description: 'What the model is, e.g. BAAI/bge-small-en-v1.5.' },
    repo: { type: 'string', description: 'Hugging Face repository download-embedding.ts fetches from.' },
    file: {
      type: 'string',
      pattern: '^[A-Za-z0-9_][A-Za-z0-9._/-]*\\.onnx$',
      description: 'ONNX graph inside the model directory.',
    },
    extra_files: {
      type: 'array',
      items: { type: 'string' },
      description: 'Files beside the graph (external weights).',
    },
    dimension: { type: 'integer', minimum: 1, maximum: 65536 },
    pooling: { enum: ['cls', 'mean'] },
    normalize: { type: 'boolean' },
    max_length: { type: 'integer', minimum: 8, maximum: 32768 },
    query_prefix: { type: 'string' },
    passage_prefix: { type: 'string' },
  },
} as const satisfies JsonSchema;
type CardOverride = FromSchema<typeof cardOverrideSchema>;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    models_dir: {
      type: 'string',
      default: '../models/embeddings',
      description: 'Directory holding one folder per model name (relative to the config file).',
    },
    pool_size: {
      type: 'integer',
      minimum: 1,
      maximum: 64,
      default: 1,
      description:
        'Session workers per loaded model (each holds a copy of the weights); batches run in parallel on them.',
    },
    intra_op_threads: {
      type: 'integer',
      minimum: 1,
      maximum: 64,
      default: 1,
      description: 'onnxruntime intra-op threads per session.',
    },
    batch_size: {
      type: 'integer',
      minimum: 1,
      maximum: 1024,
      default: 32,
      description: 'Texts per model run.',
    },
    max_length: {
      type: 'integer',
      minimum: 8,
      maximum: 32768,
      default: 512,
      description:
        "Upper bound on tokens per text (a model's own limit applies when lower); longer texts are truncated.",
    },
    preload: {
      type: 'array',
      items: { type: 'string' },
      uniqueItems: true,
      description:
        'Models to load at start; health is not ok until they are loaded (one that is not installed is logged and loads on first use once its files are there).',
    },
    models: {
      type: 'object',
      additionalProperties: cardOverrideSchema,
      description: 'Overrides of built-in cards, or new models (which need file, dimension and pooling).',
    },
  },
} as const satisfies JsonSchema;
type ResourceOptions = FromSchema<typeof optionsSchema>;

export default defineResource<ResourceOptions, EmbeddingModels>({
  type: 'embedding-models',
  description:
    'Text embedding models (ONNX, onnxruntime-node in worker threads) by the names of model-cards.ts, loaded lazily from a local models directory.',
  options: optionsSchema,
  async create(options, env) {
    const modelsDir = env.resolvePath(options.models_dir);
    const cards = buildCards(toCardOverrides(options.models ?? {}));
    const runOptions = {
      poolSize: options.pool_size,
      intraOpThreads: options.intra_op_threads,
      batchSize: options.batch_size,
      maxLength: options.max_length,
    };
    const loaded = new Map<string, EmbeddingModel>();
    const loading = new Map<string, Promise<EmbeddingModel>>();
    const errors = new Map<string, string>();
    let closed = false;

    const texts = env.metrics.counter({
      name: 'switchyard_embed_texts_total',
      help: 'Texts embedded, by model',
      labelNames: ['model'] as const,
    });
    const seconds = env.metrics.histogram({
      name: 'switchyard_embed_duration_seconds',
      help: 'Time to embed one list of texts (tokenisation and model runs), by model',
      labelNames: ['model'] as const,
      buckets: latencyBuckets,
    });

    function cardOf(name: string): ModelCard {
      const card = cards.get(name);
      if (!card) throw new GatewayError('bad_request', `Unsupported embedding model: ${name}`);
      return card;
    }

    async function model(name: string): Promise<EmbeddingModel> {
      const ready = loaded.get(name);
      if (ready) return ready;
      const card = cardOf(name);
      let pending = loading.get(name);
      if (!pending) {
        const located = locateModel(modelsDir, card);
        if ('missing' in located) {
          throw new GatewayError('unavailable', notInstalledMessage(modelsDir, card, located.missing), {
            details: { model: name, dir: modelDir(modelsDir, name), missing: located.missing },
          });
        }
        const started = Date.now();
        pending = EmbeddingModel.load(card, located.files, runOptions);
        loading.set(name, pending);
        pending.then(
          async (m) => {
            loading.delete(name);
            if (closed) return void (await m.close());
            loaded.set(name, m);
            errors.delete(name);
            env.logger.info({ model: name, ms: Date.now() - started, inputs: m.inputs }, 'embedding model loaded');
          },
          (err: Error) => {
            loading.delete(name);
            errors.set(name, err.message);
            env.logger.error({ model: name, err: err.message }, 'embedding model failed to load');
          },
        );
      }
      try {
        return await pending;
      } catch (err) {
        throw new GatewayError('internal_error', `Embedding model ${name} failed to load: ${(err as Error).message}`, {
          cause: err,
        });
      }
    }

    const value: EmbeddingModels = {
      names: () => [...cards.keys()],
      card: (name) => cards.get(name),
      async embed(name: string, input: string[], embedOptions: EmbedOptions = {}) {
        const m = await model(name);
        if (input.length === 0) return [];
        const end = seconds.startTimer({ model: name });
        try {
          const vectors = await m.embed(input, embedOptions.inputType ?? 'passage');
          texts.inc({ model: name }, input.length);
          return vectors;
        } finally {
          end();
        }
      },
      status(name: string) {
        const card = cardOf(name);
        const dir = modelDir(modelsDir, name);
        let status: ModelStatus;
        if (loaded.has(name)) status = 'loaded';
        else if (loading.has(name)) status = 'loading';
        else if (errors.has(name)) status = 'error';
        else status = 'missing' in locateModel(modelsDir, card) ? 'missing' : 'installed';
        return { status, dir, ...(errors.has(name) ? { error: errors.get(name) } : {}) };
      },
    };

    for (const name of options.preload ?? []) {
      cardOf(name);
      await model(name).catch((err: Error) =>
        env.logger.warn({ model: name, err: err.message }, 'embedding model not preloaded'),
      );
    }

    return {
      value,
      // Ready when every preloaded model is loaded: a deployment without its models takes no traffic.
      health(): HealthReport {
        const byStatus: Record<string, string[]> = {};
        for (const name of cards.keys()) {
          const { status } = value.status(name);
          byStatus[status] = [...(byStatus[status] ?? []), name];
        }
        const notLoaded = (options.preload ?? []).filter((name) => !loaded.has(name));
        // A probe after the files were put in place starts the load.
        for (const name of notLoaded) if (value.status(name).status === 'installed') void model(name).catch(() => {});
        return {
          ok: notLoaded.length === 0,
          status: notLoaded.length === 0 ? 'ready' : `not loaded: ${notLoaded.join(', ')}`,
          detail: { models_dir: modelsDir, ...byStatus },
        };
      },
      describe: () => ({ models_dir: modelsDir, ...runOptions, models: cards.size, loaded: [...loaded.keys()] }),
      // The session workers' heaps hold every batch's output tensors until they collect.
      trimMemory() {
        for (const m of loaded.values()) m.trim();
      },
      async close() {
        closed = true;
        const pending = [...loading.values()].map((p) => p.catch(() => undefined));
        await Promise.all([...loaded.values()].map((m) => m.close()));
        loaded.clear();
        await Promise.all(pending);
      },
    };
  },
});

function toCardOverrides(models: Record<string, CardOverride>): Record<string, CardChange> {
  const out: Record<string, CardChange> = {};
  for (const [name, o] of Object.entries(models)) {
    const card: CardChange = {};
    if (o.model !== undefined) card.model = o.model;
    if (o.repo !== undefined) card.repo = o.repo;
    if (o.file !== undefined) card.file = o.file;
    if (o.extra_files !== undefined) card.extraFiles = o.extra_files;
    if (o.dimension !== undefined) card.dimension = o.dimension;
    if (o.pooling !== undefined) card.pooling = o.pooling;
    if (o.normalize !== undefined) card.normalize = o.normalize;
    if (o.max_length !== undefined) card.maxLength = o.max_length;
    card.prefixes = {};
    if (o.query_prefix !== undefined) card.prefixes.query = o.query_prefix;
    if (o.passage_prefix !== undefined) card.prefixes.passage = o.passage_prefix;
    out[name] = card;
  }
  return out;
}
