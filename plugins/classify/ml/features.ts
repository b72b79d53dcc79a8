/**
 * The `linear-features` feature scheme: text → fixed-length float vector, computed in TypeScript
 * both by the training script (scripts/models/train-injection.ts) and at inference, from the
 * parameters in the model's features.json. docs/models.md describes it for other implementers.
 *
 * 1. Normalise: Unicode NFKC, lowercase, whitespace runs → one space, trimmed.
 * 2. Word group: tokens are runs of letters/digits/underscore, or single other non-space characters
 *    (punctuation matters: `###`, `<!--`, `{`). Word n-grams for n = 1..word_ngrams, hashed as the
 *    string `w<n>:` + tokens joined by one space.
 * 3. Char group: every character n-gram (UTF-16 code units), n = char_ngrams[0]..char_ngrams[1], of the
 *    normalised text padded with one space at each end, hashed as `c:` + n-gram.
 * 4. Hashing: 32-bit FNV-1a over UTF-16 code units; index = hash mod dimension (a power of two),
 *    sign = −1 when bit 31 is set (signed feature hashing, so collisions tend to cancel).
 * 5. Weighting: per group, signed counts c → sign(c)·log(1 + |c|), the group vector L2-normalised,
 *    then word group × word_weight + char group × char_weight (each 1/√2 by default).
 */

export interface FeatureScheme {
  scheme: 'hashed-ngrams';
  version: 1;
  dimension: number;
  word_ngrams: number;
  char_ngrams: [number, number];
  word_weight: number;
  char_weight: number;
}

export const defaultFeatureScheme: FeatureScheme = {
  scheme: 'hashed-ngrams',
  version: 1,
  dimension: 4096,
  word_ngrams: 2,
  char_ngrams: [3, 5],
  word_weight: Math.SQRT1_2,
  char_weight: Math.SQRT1_2,
};

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const TOKEN = /[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;

function fnvString(hash: number, text: string): number {
  let h = hash;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return h >>> 0;
}

/** Validates a features.json object; throws with the offending field. */
export function parseFeatureScheme(value: unknown): FeatureScheme {
  const v = value as Partial<FeatureScheme> | null;
  if (v?.scheme !== 'hashed-ngrams' || v.version !== 1) {
    throw new Error('features.json: expected scheme "hashed-ngrams", version 1');
  }
  const d = v.dimension;
  if (typeof d !== 'number' || d < 2 || (d & (d - 1)) !== 0)
    throw new Error('features.json: dimension must be a power of two');
  if (!Number.isInteger(v.word_ngrams) || (v.word_ngrams ?? 0) < 1)
    throw new Error('features.json: word_ngrams must be ≥ 1');
  const c = v.char_ngrams;
  if (!Array.isArray(c) || c.length !== 2 || !(c[0] >= 1 && c[1] >= c[0])) {
    throw new Error('features.json: char_ngrams must be [min, max] with 1 ≤ min ≤ max');
  }
  if (typeof v.word_weight !== 'number' || typeof v.char_weight !== 'number') {
    throw new Error('features.json: word_weight and char_weight must be numbers');
  }
  return v as FeatureScheme;
}

export function normalizeText(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim();
}

/** Signed hashed counts of one feature group, touching only the slots it uses (vectors are sparse). */
class HashedCounts {
  readonly values: Float32Array;
  private readonly used: Uint8Array;
  private readonly touched: Int32Array;
  private count = 0;

  constructor(private readonly mask: number) {
    this.values = new Float32Array(mask + 1);
    this.used = new Uint8Array(mask + 1);
    this.touched = new Int32Array(mask + 1);
  }

  add(hash: number): void {
    const i = hash & this.mask;
    if (this.used[i] === 0) {
      this.used[i] = 1;
      this.touched[this.count++] = i;
    }
    this.values[i] += hash & 0x80000000 ? -1 : 1;
  }

  /** Applies sign(c)·log(1+|c|) and adds the L2-normalised result × weight into `out` at `offset`, then resets. */
  flushInto(out: Float32Array, offset: number, weight: number): void {
    let sum = 0;
    for (let k = 0; k < this.count; k++) {
      const i = this.touched[k];
      const c = this.values[i];
      const w = c > 0 ? Math.log1p(c) : -Math.log1p(-c);
      this.values[i] = w;
      sum += w * w;
    }
    const scale = sum > 0 ? weight / Math.sqrt(sum) : 0;
    for (let k = 0; k < this.count; k++) {
      const i = this.touched[k];
      out[offset + i] += this.values[i] * scale;
      this.values[i] = 0;
      this.used[i] = 0;
    }
    this.count = 0;
  }
}

/** Computes feature vectors; keeps its scratch buffers between calls (not re-entrant). */
export class FeatureExtractor {
  private readonly words: HashedCounts;
  private readonly chars: HashedCounts;

  constructor(readonly scheme: FeatureScheme) {
    this.words = new HashedCounts(scheme.dimension - 1);
    this.chars = new HashedCounts(scheme.dimension - 1);
  }

  /** Writes the vector of `text` into `out` at `offset` (dimension values, overwritten). */
  extract(text: string, out: Float32Array, offset = 0): void {
    const normalized = normalizeText(text);
    const { words, chars, scheme } = this;

    const tokens = normalized.match(TOKEN) ?? [];
    for (let n = 1; n <= scheme.word_ngrams; n++) {
      const prefix = fnvString(FNV_OFFSET, `w${n}:`);
      for (let i = 0; i + n <= tokens.length; i++) {
        words.add(fnvString(prefix, n === 1 ? tokens[i] : tokens.slice(i, i + n).join(' ')));
      }
    }

    const padded = ` ${normalized} `;
    const [minN, maxN] = scheme.char_ngrams;
    const charPrefix = fnvString(FNV_OFFSET, 'c:');
    for (let i = 0; i + minN <= padded.length; i++) {
      let h = charPrefix;
      for (let k = 0; k < maxN && i + k < padded.length; k++) {
        h = Math.imul(h ^ padded.charCodeAt(i + k), FNV_PRIME);
        if (k + 1 >= minN) chars.add(h >>> 0);
      }
    }

    out.fill(0, offset, offset + scheme.dimension);
    words.flushInto(out, offset, scheme.word_weight);
    chars.flushInto(out, offset, scheme.char_weight);
  }
}
