/**
 * The `chunker` resource's value, for stages that split text (the embedding service's
 * plugins/embed). Import the type from here, never the implementation.
 */
export interface ChunkOptions {
  /** A chunking type from `types`, e.g. `words`. */
  type: string;
  /** Words per chunk for `words`; the maximum words per chunk for the LLM types. Positive integer. */
  size: number;
}

export interface Chunker {
  /** The enabled chunking types, in a stable order (`words` first). */
  types: string[];
  /**
   * Splits `text` into chunks, in order. Throws GatewayError `bad_request` with the message
   * `Unsupported chunking type: <name>` for a type not in `types`, and `bad_request` for a size
   * that is not a positive integer.
   */
  chunk(text: string, options: ChunkOptions): Promise<string[]>;
}

/** Every type this plugin knows, in the order the seed lists them. */
export const CHUNKING_TYPES = ['words', 'llm-concept', 'llm-introspection'] as const;
export type ChunkingType = (typeof CHUNKING_TYPES)[number];

export const DEFAULT_CHUNK_SIZE = 512;
