/**
 * Public contract of the embed plugin: the `embedding-models` resource's value (what other
 * plugins, e.g. a search service, may call), the model card, and the two resources the
 * `embed-process` stage composes (a content fetcher and a chunker), described by the shape it
 * needs from them.
 */

export type Pooling = 'cls' | 'mean';

/** `passage` (documents, the default) or `query` (search queries): picks the model's prefix. */
export type InputType = 'query' | 'passage';

export interface ModelCard {
  /** The service's name for it, e.g. `BGESmallENV15`. */
  name: string;
  /** The model it is, e.g. `BAAI/bge-small-en-v1.5`. */
  model: string;
  /** Hugging Face repository of the ONNX export (what download-embedding.ts fetches). */
  repo: string;
  /** Path of the ONNX graph inside the repository and inside the model's directory. */
  file: string;
  /** Files stored beside the graph (external weights). */
  extraFiles: string[];
  dimension: number;
  pooling: Pooling;
  /** Unit-length vectors (L2). */
  normalize: boolean;
  /** Tokens per text, special tokens included; longer texts are truncated. */
  maxLength: number;
  /** Prepended to each text by input type ('' for none). */
  prefixes: { query: string; passage: string };
  /** `dynamic`: activation scales are computed per batch, so vectors vary slightly with batch composition. */
  quantization: 'none' | 'static' | 'dynamic';
}

export interface EmbedOptions {
  inputType?: InputType;
  signal?: AbortSignal;
}

export type ModelStatus = 'missing' | 'installed' | 'loading' | 'loaded' | 'error';

/** Value of an `embedding-models` resource. */
export interface EmbeddingModels {
  /** Every model name the service offers (built-in cards and configured ones), installed or not. */
  names(): string[];
  card(name: string): ModelCard | undefined;
  /**
   * One vector per text, in order. Throws GatewayError: `bad_request` `Unsupported embedding
   * model: <name>`; `unavailable` (503) when the model's files are not in the models directory
   * (the message says which files go where).
   */
  embed(name: string, texts: string[], options?: EmbedOptions): Promise<number[][]>;
  status(name: string): { status: ModelStatus; error?: string; dir: string };
}

/** What `embed-process` needs of a content fetcher resource (plugins/content-fetcher). */
export interface ContentFetcher {
  fetchText(
    url: string,
    options?: { signal?: AbortSignal },
  ): Promise<{ url: string; text: string; contentType: string }>;
}

/** What `embed-process` and the params route need of a chunker resource (plugins/chunker). */
export interface Chunker {
  types: string[];
  chunk(text: string, options: { type: string; size: number }): Promise<string[]>;
}
