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
 * 6. Version 2 only: `shape_features`, dense features of the text's shape (NFKC, whitespace runs →
 *    one space, trimmed, case kept) appended after the hashed slots (vector length = dimension +
 *    their count), each in [0, 1] times shape_weight — see
 *    SHAPE_FEATURES for their definitions (adversarial-suffix gibberish, role-play and rule-override
 *    cues, length).
 */

export interface FeatureScheme {
  scheme: 'hashed-ngrams';
  version: 1 | 2;
  dimension: number;
  word_ngrams: number;
  char_ngrams: [number, number];
  word_weight: number;
  char_weight: number;
  /** Version 2: names of the dense shape features appended after the hashed slots, in order. */
  shape_features?: ShapeFeature[];
  shape_weight?: number;
}

/** Length of the vector a scheme produces (the model's input width). */
export function vectorLength(scheme: FeatureScheme): number {
  return scheme.dimension + (scheme.shape_features?.length ?? 0);
}

const ROLEPLAY_CUE =
  /\b(?:imagine (?:you are|you're|that you|a world)|pretend (?:to be|you are|you're|that)|act(?:ing)? as|you are (?:now |going to be |to be )?(?:a|an|my|the) |role[- ]?play|stay in character|in character|play the (?:role|part)|hypothetical(?:ly)?|fictional|a story (?:where|in which|about)|screenplay|novel|simulat(?:e|ion)|persona|character)/i;
const OVERRIDE_CUE =
  /\b(?:ignor(?:e|ing)|disregard|forget|bypass|override|no (?:longer )?(?:restrictions?|rules|limits|filters?|guidelines|ethics|morals?|censorship)|without (?:any )?(?:restrictions?|rules|limits|filters?|guidelines|ethic\w*|censorship|refus\w*)|(?:not|never) (?:be )?(?:bound|restricted|limited) by|unfiltered|uncensored|unrestricted|jailbr\w*|never refuse|always (?:answer|comply)|do anything now|developer mode|(?:rules|guidelines|policies) (?:do not|don't) apply|(?:ethical|moral) implications)/i;

const LETTER = /\p{L}/u;
const DIGIT = /\p{N}/u;
const OPENERS = new Set([...'("\'“‘[']);
const CLOSERS = new Set([...'.,;:!?)"\'”’]']);

/** 1: ASCII letter, 2: other letter, 3: digit, 0: anything else. */
function charClass(ch: string): number {
  const c = ch.charCodeAt(0);
  if ((c >= 97 && c <= 122) || (c >= 65 && c <= 90)) return 1;
  if (c >= 48 && c <= 57) return 3;
  if (c < 128) return 0;
  return LETTER.test(ch) ? 2 : DIGIT.test(ch) ? 3 : 0;
}

/**
 * A token that does not look like a word of prose (GCG / random-search suffix material): a case
 * switch inside it (`similarlyNow`), two or more symbols, letters with a symbol, Latin letters
 * mixed with another script, or symbols only — once the quotes and brackets around it and the
 * punctuation after it are set aside.
 */
export function oddToken(token: string): boolean {
  const chars = [...token];
  let start = 0;
  let end = chars.length;
  while (start < end && OPENERS.has(chars[start])) start++;
  while (end > start && CLOSERS.has(chars[end - 1])) end--;
  if (start === end) return chars.length > 0 && !chars.every((c) => CLOSERS.has(c) || OPENERS.has(c));
  let latin = 0;
  let other = 0;
  let digits = 0;
  let symbols = 0;
  let prevLower = false;
  let caseSwitch = false;
  for (let i = start; i < end; i++) {
    const ch = chars[i];
    const k = charClass(ch);
    if (k === 1 || k === 2) {
      if (k === 1) latin++;
      else other++;
      const upper = ch !== ch.toLowerCase();
      if (upper && prevLower) caseSwitch = true;
      prevLower = !upper && ch !== ch.toUpperCase();
    } else {
      prevLower = false;
      if (k === 3) digits++;
      else if (ch !== "'" && ch !== '’' && ch !== '-') symbols++;
    }
  }
  const letters = latin + other;
  return (
    caseSwitch ||
    symbols >= 2 ||
    (letters > 0 && symbols >= 1) ||
    (latin > 0 && other > 0) ||
    (letters === 0 && digits === 0 && symbols > 0)
  );
}

function isAscii(text: string, start = 0, end = text.length): boolean {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) > 127) return false;
  return true;
}

/** ASCII openers ( " ' [ and closers . , ; : ! ? ) " ' ] of OPENERS and CLOSERS, by code. */
const asciiOpener = (c: number) => c === 40 || c === 34 || c === 39 || c === 91;
const asciiCloser = (c: number) =>
  c === 46 || c === 44 || c === 59 || c === 58 || c === 33 || c === 63 || c === 41 || c === 34 || c === 39 || c === 93;

/**
 * oddToken of the ASCII token text[from, to), on its codes (no string, no code point array, no
 * case mapping per character): most tokens of most prompts, and the same answer (a test compares
 * shapeValues with SHAPE_FEATURES).
 */
function oddAsciiToken(token: string, from: number, to: number): boolean {
  let start = from;
  let end = to;
  while (start < end && asciiOpener(token.charCodeAt(start))) start++;
  while (end > start && asciiCloser(token.charCodeAt(end - 1))) end--;
  // Nothing left: every character is an opener or a closer, which is not odd.
  if (start === end) return false;
  let latin = 0;
  let digits = 0;
  let symbols = 0;
  let prevLower = false;
  let caseSwitch = false;
  for (let i = start; i < end; i++) {
    const c = token.charCodeAt(i);
    if (c >= 97 && c <= 122) {
      latin++;
      prevLower = true;
    } else if (c >= 65 && c <= 90) {
      latin++;
      if (prevLower) caseSwitch = true;
      prevLower = false;
    } else {
      prevLower = false;
      if (c >= 48 && c <= 57) digits++;
      else if (c !== 39 && c !== 45) symbols++;
    }
  }
  return caseSwitch || symbols >= 2 || (latin > 0 && symbols >= 1) || (latin === 0 && digits === 0 && symbols > 0);
}

/** SHAPE_FEATURES.tail_symbols of an ASCII tail (its last 400 characters), on codes. */
function asciiTailSymbols(tail: string): number {
  let n = 0;
  let symbols = 0;
  for (let i = tail.length - 1; i >= 0 && n < 200; i--) {
    const c = tail.charCodeAt(i);
    if (c === 32 || (c >= 9 && c <= 13)) continue; // \s
    n++;
    const letterOrDigit = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57);
    // . , ? ! ' " are not symbols
    if (!letterOrDigit && c !== 46 && c !== 44 && c !== 63 && c !== 33 && c !== 39 && c !== 34) symbols++;
  }
  return n === 0 ? 0 : Math.min(1, (3 * symbols) / n);
}

/** oddToken of text[start, end), with the ASCII tokens of most prompts read off their codes. */
function isOdd(text: string, start = 0, end = text.length): boolean {
  return isAscii(text, start, end) ? oddAsciiToken(text, start, end) : oddToken(text.slice(start, end));
}

/** Odd tokens ÷ the number of tokens, or ÷ `atLeast` when there are fewer. */
function oddShare(tokens: string[], atLeast = 1, isOddToken = oddToken): number {
  if (tokens.length === 0) return 0;
  let odd = 0;
  for (const t of tokens) if (isOddToken(t)) odd++;
  return odd / Math.max(atLeast, tokens.length);
}

const words = (text: string) => text.split(/\s+/).filter((t) => t !== '');

/** The tail the tail features read: this many last tokens. */
const TAIL_TOKENS = 40;

interface OddCounts {
  /** Tokens of the text, and how many of them are odd. */
  tokens: number;
  odd: number;
  /** Odd tokens among the last TAIL_TOKENS, and where the first of those starts. */
  tailOdd: number;
  tailStart: number;
}

/** The last TAIL_TOKENS tokens' oddness and starts, reused from text to text (shapeValues is synchronous). */
const tailFlags = new Uint8Array(TAIL_TOKENS);
const tailStarts = new Int32Array(TAIL_TOKENS);

/**
 * The text's tokens and odd tokens, in one pass and read in place: the shaped text has single
 * blanks between its words and none at its ends. A token's ASCII-ness is known as its end is
 * looked for: an ASCII token (most tokens of most prompts) is judged off its codes.
 */
function oddCounts(text: string): OddCounts {
  const n = text.length;
  let tokens = 0;
  let odd = 0;
  let tailOdd = 0;
  let start = 0;
  let ascii = true;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? text.charCodeAt(i) : 32;
    if (c !== 32) {
      if (c > 127) ascii = false;
      continue;
    }
    if (i > start) {
      const flag = (ascii ? oddAsciiToken(text, start, i) : oddToken(text.slice(start, i))) ? 1 : 0;
      const slot = tokens % TAIL_TOKENS;
      // The slot's previous token leaves the tail once TAIL_TOKENS are counted.
      if (tokens >= TAIL_TOKENS) tailOdd -= tailFlags[slot];
      tailFlags[slot] = flag;
      tailStarts[slot] = start;
      tailOdd += flag;
      odd += flag;
      tokens++;
    }
    start = i + 1;
    ascii = true;
  }
  const tailStart = tokens === 0 ? 0 : tailStarts[tokens < TAIL_TOKENS ? 0 : tokens % TAIL_TOKENS];
  return { tokens, odd, tailOdd, tailStart };
}

/** Dense features of the text's shape, each in [0, 1]. */
export const SHAPE_FEATURES = {
  /** Share of odd tokens (oddToken) among the last 40 whitespace-separated tokens. */
  tail_odd_tokens(text: string): number {
    return oddShare(words(text.slice(-1000)).slice(-40));
  },
  /** Share of symbols (not letters, digits, blanks or . , ? ! ' " ’) among the last 200 non-blank characters, ×3, capped at 1. */
  tail_symbols(text: string): number {
    let n = 0;
    let symbols = 0;
    const tail = [...text.slice(-400)];
    for (let i = tail.length - 1; i >= 0 && n < 200; i--) {
      const ch = tail[i];
      if (/\s/.test(ch)) continue;
      n++;
      if (charClass(ch) === 0 && !'.,?!\'"’'.includes(ch)) symbols++;
    }
    return n === 0 ? 0 : Math.min(1, (3 * symbols) / n);
  },
  /** Share of odd tokens in the whole text. */
  odd_tokens(text: string): number {
    return oddShare(words(text));
  },
  /**
   * Odd tokens among the last 40 tokens ÷ 40: like tail_odd_tokens, but a short text's one odd
   * token (an e-mail address, a path, `{{name}}` alone) weighs 1/40, not 1 — a suffix is many.
   */
  tail_odd_density(text: string): number {
    return oddShare(words(text.slice(-1000)).slice(-40), 40);
  },
  /** Odd tokens ÷ the number of tokens, at least 40 (as tail_odd_density, over the whole text). */
  odd_density(text: string): number {
    return oddShare(words(text), 40);
  },
  roleplay(text: string): number {
    return ROLEPLAY_CUE.test(text) ? 1 : 0;
  },
  override(text: string): number {
    return OVERRIDE_CUE.test(text) ? 1 : 0;
  },
  /** Role-play framing and a rule override together: the structure of most jailbreaks. */
  roleplay_override(text: string): number {
    return ROLEPLAY_CUE.test(text) && OVERRIDE_CUE.test(text) ? 1 : 0;
  },
  /** log(1 + characters) / log(1 + 8000), capped at 1. */
  length(text: string): number {
    return Math.min(1, Math.log1p(text.length) / Math.log1p(8000));
  },
} as const;

export type ShapeFeature = keyof typeof SHAPE_FEATURES;

/**
 * SHAPE_FEATURES of one text with the work they share done once: the tokens and which are odd
 * (four features read them), the two cues (three read them); ASCII tokens and an ASCII tail read
 * off their codes. Same values as SHAPE_FEATURES (a test compares them); what extraction uses.
 * `text` is shaped as extraction gives it: NFKC, whitespace runs → one blank, trimmed.
 */
export function shapeValues(text: string, names: readonly ShapeFeature[]): number[] {
  let odd: OddCounts | undefined;
  // The last 40 tokens: of the whole text, unless they do not all lie in its last 1 000
  // characters (the definition reads those: a few long tokens, or a token cut by the slice).
  const tailShare = (atLeast: number) => {
    odd ??= oddCounts(text);
    const last = Math.min(TAIL_TOKENS, odd.tokens);
    if (text.length > 1000 && (last < TAIL_TOKENS || odd.tailStart < text.length - 1000)) {
      return oddShare(words(text.slice(-1000)).slice(-40), atLeast, (t) => isOdd(t));
    }
    return last === 0 ? 0 : odd.tailOdd / Math.max(atLeast, last);
  };
  const share = (atLeast: number) => {
    odd ??= oddCounts(text);
    return odd.tokens === 0 ? 0 : odd.odd / Math.max(atLeast, odd.tokens);
  };
  let roleplay: boolean | undefined;
  let override: boolean | undefined;
  const isRoleplay = () => {
    roleplay ??= ROLEPLAY_CUE.test(text);
    return roleplay;
  };
  const isOverride = () => {
    override ??= OVERRIDE_CUE.test(text);
    return override;
  };
  return names.map((name) => {
    switch (name) {
      case 'tail_odd_tokens':
        return tailShare(1);
      case 'tail_odd_density':
        return tailShare(40);
      case 'odd_tokens':
        return share(1);
      case 'odd_density':
        return share(40);
      case 'roleplay':
        return isRoleplay() ? 1 : 0;
      case 'override':
        return isOverride() ? 1 : 0;
      case 'roleplay_override':
        return isRoleplay() && isOverride() ? 1 : 0;
      case 'tail_symbols': {
        const tail = text.slice(-400);
        return isAscii(tail) ? asciiTailSymbols(tail) : SHAPE_FEATURES.tail_symbols(text);
      }
      default:
        return SHAPE_FEATURES[name](text);
    }
  });
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
/** The tokens of the word group, as defined; FeatureExtractor reads them off code units (tokenize). */
export const TOKEN = /[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;

const SPACE = 1;
const TOKEN_CHAR = 2;
const OTHER = 3;
/** The class of each BMP code unit (0: not looked up yet), filled from the regular expressions as met. */
const bmpClasses = new Uint8Array(65536);
const SPACE_RE = /\s/;
const TOKEN_CHAR_RE = /^[\p{L}\p{N}_]$/u;

/** SPACE (`\s`), TOKEN_CHAR (`[\p{L}\p{N}_]`) or OTHER (a lone surrogate among them). */
function classOf(c: number): number {
  let k = bmpClasses[c];
  if (k === 0) {
    const ch = String.fromCharCode(c);
    k = SPACE_RE.test(ch) ? SPACE : TOKEN_CHAR_RE.test(ch) ? TOKEN_CHAR : OTHER;
    bmpClasses[c] = k;
  }
  return k;
}

/** 2 when codes[i] and codes[i + 1] (i + 1 < end) are a surrogate pair (one code point), else 1. */
function unitsAt(codes: Uint16Array, i: number, end: number): number {
  const c = codes[i];
  if (c < 0xd800 || c > 0xdbff || i + 1 >= end) return 1;
  const d = codes[i + 1];
  return d >= 0xdc00 && d <= 0xdfff ? 2 : 1;
}

/** Whether the code point at codes[i] (`units` long) is a letter, a digit or _. */
function isTokenChar(codes: Uint16Array, i: number, units: number): boolean {
  if (units === 1) return classOf(codes[i]) === TOKEN_CHAR;
  const cp = (codes[i] - 0xd800) * 0x400 + (codes[i + 1] - 0xdc00) + 0x10000;
  return TOKEN_CHAR_RE.test(String.fromCodePoint(cp));
}

function fnvString(hash: number, text: string): number {
  let h = hash;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return h >>> 0;
}

/** Validates a features.json object; throws with the offending field. */
export function parseFeatureScheme(value: unknown): FeatureScheme {
  const v = value as Partial<FeatureScheme> | null;
  if (v?.scheme !== 'hashed-ngrams' || (v.version !== 1 && v.version !== 2)) {
    throw new Error('features.json: expected scheme "hashed-ngrams", version 1 or 2');
  }
  if (v.version === 2) {
    const names = v.shape_features;
    if (!Array.isArray(names) || names.some((n) => !Object.hasOwn(SHAPE_FEATURES, n))) {
      throw new Error(`features.json: shape_features must list names among ${Object.keys(SHAPE_FEATURES).join(', ')}`);
    }
    if (typeof v.shape_weight !== 'number') throw new Error('features.json: shape_weight must be a number');
  } else if (v.shape_features !== undefined) {
    throw new Error('features.json: shape_features need version 2');
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

/**
 * Step 1 of the scheme, as defined; FeatureExtractor does the same while it copies the text into
 * code units (normalizeInto), and a test holds the two to each other.
 */
export function normalizeText(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim();
}

/**
 * `text.replace(/\s+/g, ' ').trim()` (JS `\s` is classOf's SPACE), with no copy of the stretches
 * already written so (most prompts are one stretch: single blanks between words).
 */
export function collapseSpaces(text: string): string {
  const n = text.length;
  let out = '';
  // Start of the stretch being kept: text[start, i) has single blanks between non-spaces only.
  let start = -1;
  let i = 0;
  while (i < n) {
    if (classOf(text.charCodeAt(i)) !== SPACE) {
      if (start < 0) start = i;
      i++;
      continue;
    }
    let j = i + 1;
    while (j < n && classOf(text.charCodeAt(j)) === SPACE) j++;
    // A run that is not one blank inside the text ends the stretch before it.
    if (start >= 0 && (j === n || j > i + 1 || text.charCodeAt(i) !== 32)) {
      out = out === '' ? text.slice(start, i) : `${out} ${text.slice(start, i)}`;
      start = -1;
    }
    i = j;
  }
  if (start >= 0) out = out === '' ? text.slice(start) : `${out} ${text.slice(start)}`;
  return out;
}

/** log(1 + c) of the small counts most slots hold, computed once (the same values as Math.log1p). */
const LOG1P_OF_COUNT = Float64Array.from({ length: 64 }, (_, c) => Math.log1p(c));
const log1pOfCount = (c: number) => (c < 64 ? LOG1P_OF_COUNT[c] : Math.log1p(c));

/**
 * A slot's count is kept as UNTOUCHED_BIAS + count, so that 0 means "not touched by this text" and
 * one array read tells both (a count never reaches ±2^30: texts are cut far below that).
 */
const UNTOUCHED_BIAS = 1 << 30;

/** Signed hashed counts of one feature group, touching only the slots it uses (vectors are sparse). */
class HashedCounts {
  /** UNTOUCHED_BIAS + the slot's signed count; 0 for a slot the text has not touched. */
  private readonly counts: Int32Array;
  private readonly touched: Int32Array;
  /** #scale's sign(c)·log(1+|c|) of touched[k], read again by the pass that uses them. */
  private readonly scaled: Float64Array;
  private count = 0;

  constructor(private readonly mask: number) {
    this.counts = new Int32Array(mask + 1);
    this.touched = new Int32Array(mask + 1);
    this.scaled = new Float64Array(mask + 1);
  }

  add(hash: number): void {
    const i = hash & this.mask;
    const sign = hash & 0x80000000 ? -1 : 1;
    const c = this.counts[i];
    if (c === 0) {
      this.touched[this.count++] = i;
      this.counts[i] = UNTOUCHED_BIAS + sign;
    } else this.counts[i] = c + sign;
  }

  /** sign(c)·log(1+|c|) of the touched slot i. */
  #scaled(i: number): number {
    const c = this.counts[i] - UNTOUCHED_BIAS;
    return c < 0 ? -log1pOfCount(-c) : log1pOfCount(c);
  }

  /**
   * weight / the L2 norm of the touched slots' sign(c)·log(1+|c|) (0 when empty); each slot's
   * value is kept in `scaled`, so the next pass reads no count again.
   */
  #scale(weight: number): number {
    const { touched, scaled } = this;
    let sum = 0;
    for (let k = 0; k < this.count; k++) {
      const w = this.#scaled(touched[k]);
      scaled[k] = w;
      sum += w * w;
    }
    return sum > 0 ? weight / Math.sqrt(sum) : 0;
  }

  /** Adds the L2-normalised sign(c)·log(1+|c|) × weight of the touched slots into `out` at `offset`, then resets. */
  flushInto(out: Float32Array, offset: number, weight: number): void {
    const scale = this.#scale(weight);
    for (let k = 0; k < this.count; k++) {
      const i = this.touched[k];
      out[offset + i] += Math.fround(this.scaled[k]) * scale;
      this.counts[i] = 0;
    }
    this.count = 0;
  }

  /**
   * The same values, multiplied straight into a linear layer instead of written out: adds
   * Σ_i value_i · weight · W[i, k] to `logits[k]` for the touched slots i only, then resets.
   */
  dotInto(weights: Float32Array, classes: number, weight: number, logits: Float64Array): void {
    const scale = this.#scale(weight);
    if (classes === 2) {
      // Two classes (every binary model): the sums kept in locals, in the same order.
      let l0 = logits[0];
      let l1 = logits[1];
      const { touched, scaled, counts } = this;
      for (let k = 0; k < this.count; k++) {
        const i = touched[k];
        const v = Math.fround(scaled[k]) * scale;
        l0 += v * weights[2 * i];
        l1 += v * weights[2 * i + 1];
        counts[i] = 0;
      }
      logits[0] = l0;
      logits[1] = l1;
      this.count = 0;
      return;
    }
    for (let k = 0; k < this.count; k++) {
      const i = this.touched[k];
      const v = Math.fround(this.scaled[k]) * scale;
      const row = i * classes;
      for (let j = 0; j < classes; j++) logits[j] += v * weights[row + j];
      this.counts[i] = 0;
    }
    this.count = 0;
  }
}

/** Scratch buffers longer than this (code units, bound pairs) are dropped after a text. */
const retainedUnits = 1 << 16;

/** Computes feature vectors; keeps its scratch buffers between calls (not re-entrant). */
export class FeatureExtractor {
  private readonly words: HashedCounts;
  private readonly chars: HashedCounts;

  constructor(readonly scheme: FeatureScheme) {
    this.words = new HashedCounts(scheme.dimension - 1);
    this.chars = new HashedCounts(scheme.dimension - 1);
  }

  /** Values per vector: the hashed slots and the shape features. */
  get length(): number {
    return vectorLength(this.scheme);
  }

  /** Token bounds of the last text (start, end pairs, indices into `codes`), reused between calls. */
  private bounds = new Int32Array(256);
  /** The last text normalised and padded with one blank at each end, as UTF-16 code units. */
  private codes = new Uint16Array(1024);

  /**
   * Writes ` ${normalizeText(text)} ` into `codes` (the whitespace runs of the NFKC, lowercased text
   * collapsed to one blank and trimmed, as the text is copied); returns its length.
   */
  private normalizeInto(lowered: string): number {
    if (this.codes.length < lowered.length + 2) this.codes = new Uint16Array(2 * lowered.length + 2);
    const codes = this.codes;
    let n = 1;
    codes[0] = 32;
    let blank = false;
    for (let i = 0; i < lowered.length; i++) {
      const c = lowered.charCodeAt(i);
      if (classOf(c) === SPACE) {
        blank = n > 1;
        continue;
      }
      if (blank) {
        codes[n++] = 32;
        blank = false;
      }
      codes[n++] = c;
    }
    codes[n++] = 32;
    return n;
  }

  /**
   * The tokens of `TOKEN` (runs of letters, digits and _, or one other code point) in codes[1, end),
   * as bounds; returns their number.
   */
  private tokenize(end: number): number {
    const codes = this.codes;
    let tokens = 0;
    let i = 1;
    while (i < end) {
      if (codes[i] === 32) {
        i++;
        continue;
      }
      const start = i;
      let units = unitsAt(codes, i, end);
      if (isTokenChar(codes, i, units)) {
        i += units;
        while (i < end) {
          units = unitsAt(codes, i, end);
          if (!isTokenChar(codes, i, units)) break;
          i += units;
        }
      } else i += units;
      if (2 * tokens + 2 > this.bounds.length) {
        const grown = new Int32Array(this.bounds.length * 2);
        grown.set(this.bounds);
        this.bounds = grown;
      }
      this.bounds[2 * tokens] = start;
      this.bounds[2 * tokens + 1] = i;
      tokens++;
    }
    return tokens;
  }

  /**
   * Hashes the n-grams of `text` into the two groups (no strings are built: a word n-gram's hash
   * runs over its tokens' characters and the blanks between them, as over the joined string; the
   * text is read as an array of code units, not through string accessors). Returns the text for
   * the shape features.
   */
  private collect(text: string): string {
    const nfkc = text.normalize('NFKC');
    const length = this.normalizeInto(nfkc.toLowerCase());
    const tokens = this.tokenize(length - 1);
    const { words, chars, scheme, codes, bounds } = this;

    for (let n = 1; n <= scheme.word_ngrams; n++) {
      const prefix = fnvString(FNV_OFFSET, `w${n}:`);
      for (let i = 0; i + n <= tokens; i++) {
        let h = prefix;
        for (let t = i; t < i + n; t++) {
          if (t > i) h = Math.imul(h ^ 32, FNV_PRIME);
          const to = bounds[2 * t + 1];
          for (let c = bounds[2 * t]; c < to; c++) h = Math.imul(h ^ codes[c], FNV_PRIME);
        }
        words.add(h >>> 0);
      }
    }

    const [minN, maxN] = scheme.char_ngrams;
    const charPrefix = fnvString(FNV_OFFSET, 'c:');
    for (let i = 0; i + minN <= length; i++) {
      let h = charPrefix;
      const last = Math.min(maxN, length - i);
      for (let k = 0; k < last; k++) {
        h = Math.imul(h ^ codes[i + k], FNV_PRIME);
        if (k + 1 >= minN) chars.add(h >>> 0);
      }
    }
    // A long text's buffers are not kept for the next (short) one: memory stays bounded.
    if (this.codes.length > retainedUnits) this.codes = new Uint16Array(1024);
    if (this.bounds.length > retainedUnits) this.bounds = new Int32Array(256);
    // On the text NFKC-normalised with its whitespace runs collapsed, case kept (a case switch
    // inside a token is one of the signs of an adversarial suffix).
    return scheme.shape_features ? collapseSpaces(nfkc) : '';
  }

  /** Writes the vector of `text` into `out` at `offset` (`length` values, overwritten). */
  extract(text: string, out: Float32Array, offset = 0): void {
    const { words, chars, scheme } = this;
    const shaped = this.collect(text);
    out.fill(0, offset, offset + scheme.dimension);
    words.flushInto(out, offset, scheme.word_weight);
    chars.flushInto(out, offset, scheme.char_weight);
    const shape = scheme.shape_features;
    if (shape) {
      const w = scheme.shape_weight ?? 1;
      const values = shapeValues(shaped, shape);
      for (let k = 0; k < shape.length; k++) out[offset + scheme.dimension + k] = w * values[k];
    }
  }

  /**
   * `logits[k] += Σ_i x_i · weights[i · classes + k]` for the vector x of `text`, without writing
   * x out: the hashed features a text has are few, the vector is long. `weights` is row-major
   * [length, classes]; the caller starts `logits` at the bias.
   */
  dot(text: string, weights: Float32Array, classes: number, logits: Float64Array): void {
    const { words, chars, scheme } = this;
    if (weights.length !== this.length * classes) throw new Error('weights do not match the feature vector');
    const shaped = this.collect(text);
    words.dotInto(weights, classes, scheme.word_weight, logits);
    chars.dotInto(weights, classes, scheme.char_weight, logits);
    const shape = scheme.shape_features;
    if (shape) {
      const w = scheme.shape_weight ?? 1;
      const values = shapeValues(shaped, shape);
      for (let k = 0; k < shape.length; k++) {
        const v = w * values[k];
        if (v === 0) continue;
        const row = (scheme.dimension + k) * classes;
        for (let j = 0; j < classes; j++) logits[j] += v * weights[row + j];
      }
    }
  }
}
