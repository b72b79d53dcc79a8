/**
 * A reference BERT forward pass in plain TypeScript (float64), from the weights read back out of
 * an ONNX file made by scripts/models/generate-tiny-bert.ts, to check what onnxruntime computes
 * in the plugins against. Independent of the production code on purpose: it shares nothing with
 * plugins/ but the model file.
 *
 * Both generated variants (feature-extraction, sequence-classification) store the encoder under
 * the same Hugging Face names (`bert.…`); only a sequence-classification model has the head
 * (`bert.pooler.dense`, `classifier`) that logits() reads, so on a feature-extraction model
 * logits() fails naming the missing initializer.
 */
import { readFileSync } from 'node:fs';
import { readInitializers } from '../../scripts/models/onnx-graph.ts';

type Weights = Map<string, { dims: number[]; data: Float32Array }>;

/** Additive score of a padded position, as in Hugging Face's BERT. */
const MASKED_SCORE = -10000;
const LAYER_NORM_EPS = 1e-12;

/** erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7). */
function erf(x: number): number {
  const sign = x < 0 ? -1 : 1;
  const a = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * a);
  const poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return sign * (1 - poly * Math.exp(-a * a));
}

export class ReferenceBert {
  /** Encoder layers, counted from the initializers so they cannot disagree with the file. */
  readonly layers: number;

  constructor(
    private readonly w: Weights,
    private readonly heads: number,
  ) {
    let layers = 0;
    while (w.has(`bert.encoder.layer.${layers}.attention.self.query.weight`)) layers++;
    this.layers = layers;
  }

  /** `heads` is not recorded in the weights' shapes, so the caller says it. */
  static fromFile(model: string, heads: number): ReferenceBert {
    return new ReferenceBert(readInitializers(readFileSync(model)), heads);
  }

  private get(name: string): Float32Array {
    const t = this.w.get(name);
    if (!t) throw new Error(`missing initializer ${name}`);
    return t.data;
  }

  /** x · W + b with W stored [in, out]. */
  private dense(x: number[], prefix: string): number[] {
    const w = this.get(`${prefix}.weight`);
    const out = Array.from(this.get(`${prefix}.bias`), Number);
    for (let i = 0; i < x.length; i++) for (let o = 0; o < out.length; o++) out[o] += x[i] * w[i * out.length + o];
    return out;
  }

  private layerNorm(x: number[], prefix: string): number[] {
    const g = this.get(`${prefix}.weight`);
    const b = this.get(`${prefix}.bias`);
    const mean = x.reduce((s, v) => s + v, 0) / x.length;
    const variance = x.reduce((s, v) => s + (v - mean) ** 2, 0) / x.length;
    return x.map((v, i) => ((v - mean) / Math.sqrt(variance + LAYER_NORM_EPS)) * g[i] + b[i]);
  }

  /** Token vectors [T][H] of one sequence; `mask` (1 attended, 0 padding) defaults to all attended. */
  hidden(ids: number[], mask: number[] = ids.map(() => 1)): number[][] {
    const h = this.get('bert.embeddings.LayerNorm.weight').length;
    const row = (name: string, i: number) => Array.from(this.get(name).subarray(i * h, (i + 1) * h));
    let x = ids.map((id, t) => {
      const word = row('bert.embeddings.word_embeddings.weight', id);
      const pos = row('bert.embeddings.position_embeddings.weight', t);
      const type = row('bert.embeddings.token_type_embeddings.weight', 0);
      return this.layerNorm(
        word.map((v, i) => v + pos[i] + type[i]),
        'bert.embeddings.LayerNorm',
      );
    });
    const dh = h / this.heads;
    for (let l = 0; l < this.layers; l++) {
      const p = `bert.encoder.layer.${l}`;
      const q = x.map((r) => this.dense(r, `${p}.attention.self.query`));
      const k = x.map((r) => this.dense(r, `${p}.attention.self.key`));
      const v = x.map((r) => this.dense(r, `${p}.attention.self.value`));
      const context = x.map((_, t) => {
        const out = new Array<number>(h).fill(0);
        for (let head = 0; head < this.heads; head++) {
          const scores = k.map((ks, s) => {
            let dot = 0;
            for (let j = head * dh; j < (head + 1) * dh; j++) dot += q[t][j] * ks[j];
            return dot / Math.sqrt(dh) + (1 - mask[s]) * MASKED_SCORE;
          });
          const max = Math.max(...scores);
          const e = scores.map((s) => Math.exp(s - max));
          const sum = e.reduce((a, b) => a + b, 0);
          e.forEach((weight, s) => {
            for (let j = head * dh; j < (head + 1) * dh; j++) out[j] += (weight / sum) * v[s][j];
          });
        }
        return out;
      });
      const attended = x.map((r, t) => {
        const a = this.dense(context[t], `${p}.attention.output.dense`);
        return this.layerNorm(
          a.map((val, i) => val + r[i]),
          `${p}.attention.output.LayerNorm`,
        );
      });
      x = attended.map((r) => {
        const inner = this.dense(r, `${p}.intermediate.dense`).map((u) => 0.5 * u * (1 + erf(u / Math.SQRT2)));
        const out = this.dense(inner, `${p}.output.dense`);
        return this.layerNorm(
          out.map((val, i) => val + r[i]),
          `${p}.output.LayerNorm`,
        );
      });
    }
    return x;
  }

  /** The sentence vector of an unpadded sequence: CLS (first token) or the mean of all tokens, optionally L2-normalised. */
  embed(ids: number[], pooling: 'cls' | 'mean', normalize = true): number[] {
    const tokens = this.hidden(ids);
    const pooled =
      pooling === 'cls'
        ? tokens[0]
        : tokens[0].map((_, j) => tokens.reduce((sum, token) => sum + token[j], 0) / tokens.length);
    if (!normalize) return pooled;
    const norm = Math.hypot(...pooled);
    return pooled.map((v) => v / norm);
  }

  /** Sequence-classification logits: pooler (tanh dense on CLS) → classifier. */
  logits(ids: number[], mask?: number[]): number[] {
    const cls = this.hidden(ids, mask)[0];
    const pooled = this.dense(cls, 'bert.pooler.dense').map(Math.tanh);
    return this.dense(pooled, 'classifier');
  }
}
