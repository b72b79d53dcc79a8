/**
 * The embedding models the service offers, by the seed's names. Each name maps to a card: the
 * public Hugging Face repository its ONNX export comes from (the same exports fastembed uses),
 * the files to put in the model's directory, the vector size, pooling, normalisation, the token
 * limit and the query/passage prefixes the model was trained with. docs/embedding.md shows the
 * table. The seed's `Alpha` and `Beta` name parts stand for Nomic (nomic-embed-text) and
 * mixedbread (mxbai-embed-large).
 */
import type { ModelCard } from './api.ts';

/** Files every model directory has next to the ONNX graph (tokenizer_config.json and config.json are read when present). */
export const TOKENIZER_FILES = ['tokenizer.json'];
export const OPTIONAL_FILES = ['tokenizer_config.json', 'config.json', 'special_tokens_map.json'];

const E5 = { query: 'query: ', passage: 'passage: ' };
const NOMIC = { query: 'search_query: ', passage: 'search_document: ' };
/** mxbai-embed-large-v1: an instruction for retrieval queries, nothing for documents. */
const MXBAI = { query: 'Represent this sentence for searching relevant passages: ', passage: '' };

type CardSpec = Omit<ModelCard, 'name' | 'normalize' | 'prefixes' | 'quantization' | 'extraFiles'> &
  Partial<Pick<ModelCard, 'normalize' | 'prefixes' | 'quantization' | 'extraFiles'>>;

function card(name: string, spec: CardSpec): ModelCard {
  return {
    name,
    normalize: true,
    prefixes: { query: '', passage: '' },
    quantization: 'none',
    extraFiles: [],
    ...spec,
  };
}

/** In the seed's order. */
export const MODEL_CARDS: readonly ModelCard[] = [
  card('AllMiniLML6V2', {
    model: 'sentence-transformers/all-MiniLM-L6-v2',
    repo: 'Qdrant/all-MiniLM-L6-v2-onnx',
    file: 'model.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 256,
  }),
  card('AllMiniLML6V2Q', {
    model: 'sentence-transformers/all-MiniLM-L6-v2',
    repo: 'Xenova/all-MiniLM-L6-v2',
    file: 'onnx/model_quantized.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 256,
    quantization: 'dynamic',
  }),
  card('AllMiniLML12V2', {
    model: 'sentence-transformers/all-MiniLM-L12-v2',
    repo: 'Xenova/all-MiniLM-L12-v2',
    file: 'onnx/model.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 256,
  }),
  card('AllMiniLML12V2Q', {
    model: 'sentence-transformers/all-MiniLM-L12-v2',
    repo: 'Xenova/all-MiniLM-L12-v2',
    file: 'onnx/model_quantized.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 256,
    quantization: 'dynamic',
  }),
  card('BGEBaseENV15', {
    model: 'BAAI/bge-base-en-v1.5',
    repo: 'Xenova/bge-base-en-v1.5',
    file: 'onnx/model.onnx',
    dimension: 768,
    pooling: 'cls',
    maxLength: 512,
  }),
  card('BGEBaseENV15Q', {
    model: 'BAAI/bge-base-en-v1.5',
    repo: 'Qdrant/bge-base-en-v1.5-onnx-Q',
    file: 'model_optimized.onnx',
    dimension: 768,
    pooling: 'cls',
    maxLength: 512,
    quantization: 'static',
  }),
  card('BGELargeENV15', {
    model: 'BAAI/bge-large-en-v1.5',
    repo: 'Xenova/bge-large-en-v1.5',
    file: 'onnx/model.onnx',
    dimension: 1024,
    pooling: 'cls',
    maxLength: 512,
  }),
  card('BGELargeENV15Q', {
    model: 'BAAI/bge-large-en-v1.5',
    repo: 'Qdrant/bge-large-en-v1.5-onnx-Q',
    file: 'model_optimized.onnx',
    dimension: 1024,
    pooling: 'cls',
    maxLength: 512,
    quantization: 'static',
  }),
  card('BGESmallENV15', {
    model: 'BAAI/bge-small-en-v1.5',
    repo: 'Xenova/bge-small-en-v1.5',
    file: 'onnx/model.onnx',
    dimension: 384,
    pooling: 'cls',
    maxLength: 512,
  }),
  card('BGESmallENV15Q', {
    model: 'BAAI/bge-small-en-v1.5',
    repo: 'Qdrant/bge-small-en-v1.5-onnx-Q',
    file: 'model_optimized.onnx',
    dimension: 384,
    pooling: 'cls',
    maxLength: 512,
    quantization: 'static',
  }),
  card('AlphaEmbedTextV1', {
    model: 'nomic-ai/nomic-embed-text-v1',
    repo: 'nomic-ai/nomic-embed-text-v1',
    file: 'onnx/model.onnx',
    dimension: 768,
    pooling: 'mean',
    maxLength: 8192,
    prefixes: NOMIC,
  }),
  card('AlphaEmbedTextV15', {
    model: 'nomic-ai/nomic-embed-text-v1.5',
    repo: 'nomic-ai/nomic-embed-text-v1.5',
    file: 'onnx/model.onnx',
    dimension: 768,
    pooling: 'mean',
    maxLength: 8192,
    prefixes: NOMIC,
  }),
  card('AlphaEmbedTextV15Q', {
    model: 'nomic-ai/nomic-embed-text-v1.5',
    repo: 'nomic-ai/nomic-embed-text-v1.5',
    file: 'onnx/model_quantized.onnx',
    dimension: 768,
    pooling: 'mean',
    maxLength: 8192,
    prefixes: NOMIC,
    quantization: 'dynamic',
  }),
  card('ParaphraseMLMiniLML12V2', {
    model: 'sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2',
    repo: 'Xenova/paraphrase-multilingual-MiniLM-L12-v2',
    file: 'onnx/model.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 128,
  }),
  card('ParaphraseMLMiniLML12V2Q', {
    model: 'sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2',
    repo: 'Qdrant/paraphrase-multilingual-MiniLM-L12-v2-onnx-Q',
    file: 'model_optimized.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 128,
    quantization: 'static',
  }),
  card('ParaphraseMLMpnetBaseV2', {
    model: 'sentence-transformers/paraphrase-multilingual-mpnet-base-v2',
    repo: 'Xenova/paraphrase-multilingual-mpnet-base-v2',
    file: 'onnx/model.onnx',
    dimension: 768,
    pooling: 'mean',
    maxLength: 128,
  }),
  card('BGESmallZHV15', {
    model: 'BAAI/bge-small-zh-v1.5',
    repo: 'Xenova/bge-small-zh-v1.5',
    file: 'onnx/model.onnx',
    dimension: 512,
    pooling: 'cls',
    maxLength: 512,
  }),
  card('MultilingualE5Small', {
    model: 'intfloat/multilingual-e5-small',
    repo: 'intfloat/multilingual-e5-small',
    file: 'onnx/model.onnx',
    dimension: 384,
    pooling: 'mean',
    maxLength: 512,
    prefixes: E5,
  }),
  card('MultilingualE5Base', {
    model: 'intfloat/multilingual-e5-base',
    repo: 'intfloat/multilingual-e5-base',
    file: 'onnx/model.onnx',
    dimension: 768,
    pooling: 'mean',
    maxLength: 512,
    prefixes: E5,
  }),
  card('MultilingualE5Large', {
    model: 'intfloat/multilingual-e5-large',
    repo: 'Qdrant/multilingual-e5-large-onnx',
    file: 'model.onnx',
    // The weights are stored outside the graph (over 2 GB); onnxruntime reads them from beside it.
    extraFiles: ['model.onnx_data'],
    dimension: 1024,
    pooling: 'mean',
    maxLength: 512,
    prefixes: E5,
  }),
  card('BetaEmbedLargeV1', {
    model: 'mixedbread-ai/mxbai-embed-large-v1',
    repo: 'mixedbread-ai/mxbai-embed-large-v1',
    file: 'onnx/model.onnx',
    dimension: 1024,
    pooling: 'cls',
    maxLength: 512,
    prefixes: MXBAI,
  }),
  card('BetaEmbedLargeV1Q', {
    model: 'mixedbread-ai/mxbai-embed-large-v1',
    repo: 'mixedbread-ai/mxbai-embed-large-v1',
    file: 'onnx/model_quantized.onnx',
    dimension: 1024,
    pooling: 'cls',
    maxLength: 512,
    prefixes: MXBAI,
    quantization: 'dynamic',
  }),
];

export const DEFAULT_MODEL = 'BGESmallENV15';

/** A per-service change to a card, or a new card (which needs file, dimension and pooling). */
export type CardOverride = Partial<Omit<ModelCard, 'name' | 'prefixes'>> & {
  prefixes?: Partial<ModelCard['prefixes']>;
};

/** Cards by name, with per-service overrides and additions (the resource's `models` option) applied. */
export function buildCards(overrides: Record<string, CardOverride> = {}): Map<string, ModelCard> {
  const cards = new Map(MODEL_CARDS.map((c) => [c.name, c]));
  for (const [name, override] of Object.entries(overrides)) {
    const base = cards.get(name);
    if (!base) {
      const missing = (['file', 'dimension', 'pooling'] as const).filter((k) => override[k] === undefined);
      if (missing.length > 0) throw new Error(`model "${name}" is not a built-in card: it needs ${missing.join(', ')}`);
    }
    const { prefixes, ...rest } = override;
    const spec = { model: name, repo: '', maxLength: 512, ...base, ...rest } as CardSpec;
    cards.set(name, card(name, { ...spec, prefixes: { query: '', passage: '', ...base?.prefixes, ...prefixes } }));
  }
  return cards;
}
