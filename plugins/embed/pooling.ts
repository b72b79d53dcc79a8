/**
 * From a model's token vectors to one vector per text: CLS pooling (the first token's vector, as
 * BGE and mxbai were trained) or mean pooling over the attended tokens (sentence-transformers,
 * E5, Nomic), then optional L2 normalisation. Runs in the session workers on the ONNX output.
 */
import type { Pooling } from './api.ts';

/**
 * `hidden` is [batch, length, dim] row-major; `mask` is the attention mask [batch, length]
 * (1 for real tokens, 0 for padding). Returns [batch, dim].
 */
export function pool(
  hidden: Float32Array,
  mask: BigInt64Array,
  batch: number,
  length: number,
  dim: number,
  mode: Pooling,
): Float32Array {
  const out = new Float32Array(batch * dim);
  for (let b = 0; b < batch; b++) {
    const row = out.subarray(b * dim, (b + 1) * dim);
    const base = b * length * dim;
    if (mode === 'cls') {
      row.set(hidden.subarray(base, base + dim));
      continue;
    }
    // Sum in float64 for accuracy, then divide by the number of attended tokens.
    const sum = new Float64Array(dim);
    let count = 0;
    for (let t = 0; t < length; t++) {
      if (mask[b * length + t] === 0n) continue;
      count++;
      const offset = base + t * dim;
      for (let j = 0; j < dim; j++) sum[j] += hidden[offset + j];
    }
    const divisor = Math.max(count, 1e-9);
    for (let j = 0; j < dim; j++) row[j] = sum[j] / divisor;
  }
  return out;
}

/** L2-normalises each row of [rows, dim] in place (a zero row stays zero). */
export function normalizeRows(vectors: Float32Array, dim: number): Float32Array {
  for (let offset = 0; offset < vectors.length; offset += dim) {
    let norm = 0;
    for (let j = 0; j < dim; j++) norm += vectors[offset + j] * vectors[offset + j];
    norm = Math.sqrt(norm);
    if (norm < 1e-12) continue;
    for (let j = 0; j < dim; j++) vectors[offset + j] /= norm;
  }
  return vectors;
}
