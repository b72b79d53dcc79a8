/**
 * Content similarity of entities: cosine of embedding vectors when an embedding resource is
 * configured (any resource whose value has `embed(texts) → vectors`), else TF-IDF cosine over
 * the candidates' texts. Embeddings are cached by the text's hash, so an entity is embedded once
 * until its text changes.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { denseCosine, sparseCosine, tfidfVectors } from './tfidf.ts';

/** What an embedding resource offers (the embedding service's resource, say). */
export interface Embedder {
  embed(texts: string[]): Promise<number[][]>;
}

export type SimilarityMatrix = (i: number, j: number) => number;

export interface Similarity {
  readonly kind: 'embedding' | 'tfidf';
  /** Pairwise similarity of `texts` (indices into it). */
  matrix(texts: string[]): Promise<SimilarityMatrix>;
}

export function tfidfSimilarity(): Similarity {
  return {
    kind: 'tfidf',
    async matrix(texts) {
      const vectors = tfidfVectors(texts);
      return (i, j) => sparseCosine(vectors[i]!, vectors[j]!);
    },
  };
}

export function embeddingSimilarity(embedder: Embedder, cacheEntries = 100_000): Similarity {
  const cache = new LRUCache<string, number[]>({ max: cacheEntries });
  const hash = (t: string) => createHash('sha256').update(t).digest('base64');
  return {
    kind: 'embedding',
    async matrix(texts) {
      const keys = texts.map(hash);
      const missing = [...new Set(keys.filter((k) => !cache.has(k)))];
      if (missing.length > 0) {
        const firstText = new Map<string, string>();
        for (const [i, k] of keys.entries()) if (!firstText.has(k)) firstText.set(k, texts[i]!);
        const vectors = await embedder.embed(missing.map((k) => firstText.get(k)!));
        if (!Array.isArray(vectors) || vectors.length !== missing.length) {
          throw new Error(
            `the embedder returned ${Array.isArray(vectors) ? vectors.length : 'no'} vectors for ${missing.length} texts`,
          );
        }
        for (const [i, k] of missing.entries()) cache.set(k, vectors[i]!);
      }
      const vectors = keys.map((k) => cache.get(k)!);
      return (i, j) => denseCosine(vectors[i]!, vectors[j]!);
    },
  };
}
