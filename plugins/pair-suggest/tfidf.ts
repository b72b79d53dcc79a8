/**
 * Lexical similarity: TF-IDF vectors and their cosine. Used when no embedding resource is
 * configured. Terms are lower-cased Unicode words (letters and digits); term frequency is
 * sublinear (1 + ln tf) and the inverse document frequency smoothed as in scikit-learn,
 * idf = ln((1 + N) / (1 + df)) + 1, so a term present everywhere still counts a little. Vectors
 * are L2-normalised: the cosine of two documents is the dot product of their vectors, in [0, 1].
 * A document without any word has the zero vector and similarity 0 with everything.
 */

/** Sparse vector: term → weight, L2-normalised (empty for a document without words). */
export type SparseVector = Map<string, number>;

const word = /[\p{L}\p{N}]+/gu;

export function tokenize(text: string): string[] {
  return text.toLowerCase().match(word) ?? [];
}

/** TF-IDF vectors of `documents`, the IDF taken over these documents. */
export function tfidfVectors(documents: readonly string[]): SparseVector[] {
  const counts = documents.map((d) => {
    const tf = new Map<string, number>();
    for (const t of tokenize(d)) tf.set(t, (tf.get(t) ?? 0) + 1);
    return tf;
  });
  const df = new Map<string, number>();
  for (const tf of counts) for (const t of tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
  const n = documents.length;
  return counts.map((tf) => {
    const v: SparseVector = new Map();
    let norm = 0;
    for (const [t, c] of tf) {
      const w = (1 + Math.log(c)) * (Math.log((1 + n) / (1 + (df.get(t) ?? 0))) + 1);
      v.set(t, w);
      norm += w * w;
    }
    norm = Math.sqrt(norm);
    for (const [t, w] of v) v.set(t, w / norm);
    return v;
  });
}

/** Cosine of two normalised sparse vectors. */
export function sparseCosine(a: SparseVector, b: SparseVector): number {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let dot = 0;
  for (const [t, w] of small) {
    const x = large.get(t);
    if (x !== undefined) dot += w * x;
  }
  return dot;
}

/** Cosine of two dense vectors (0 when either is zero). */
export function denseCosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na > 0 && nb > 0 ? dot / Math.sqrt(na * nb) : 0;
}
