/**
 * De-obfuscation for phrase detectors (prompt injection, jailbreak). One linear pass turns the
 * text into lower-case letters separated by single spaces, undoing the cheap tricks used to slip
 * a phrase past a filter:
 *
 * - case, accents (é → e), full-width letters, common Cyrillic/Greek look-alikes (а, о, е...);
 * - leetspeak inside words: 0→o 1→i 3→e 4→a 5→s 7→t @→a $→s !→i |→i (only next to a letter,
 *   so plain numbers stay numbers);
 * - punctuation inserted inside a word (`i.g.n.o.r.e`, `ig-nore`, `don't`) is dropped;
 * - zero-width characters and soft hyphens are dropped;
 * - any run of whitespace or other characters becomes one space;
 * - letters spelled out one by one (`i g n o r e`, three or more) are joined.
 *
 * `l` is folded to `i` (as `1` and `|` are ambiguous between the two): phrase patterns get the same
 * folding (see `foldPattern`). `originalIndex(i)` is the index in the original text of normalized
 * character `i`, so matches map back to spans of the original.
 *
 * It runs on every request a phrase classifier sees, so it makes one pass over the text's code
 * units (copied natively into an array: cheaper per character than charCodeAt) into a buffer
 * reused from call to call (allocating one costs more than the pass itself), notes only
 * the characters it drops rather than an offset per character (see Normalized), and notes on the
 * way where the phrase detectors' leads begin (leading-words.ts).
 */
import { endianness } from 'node:os';
import { BOUNDARY, DEAD, END, PHRASE_LEADS, ROOT, ROW } from './leading-words.ts';

/** Letter code (a-z) for each code unit that is a letter, 0 otherwise; built once. */
const LETTER = new Uint8Array(0x10000);
const LEET = new Uint8Array(128);
/** Per code unit: JOINER (dropped between two letters) or INVISIBLE (dropped everywhere). */
const KIND = new Uint8Array(0x10000);
const JOINER = 1;
const INVISIBLE = 2;
for (const c of '.-_*\'`~^,/\\:;"+=#’‘·') KIND[c.charCodeAt(0)] = JOINER;
// Zero-width space/joiners, word joiner, BOM, soft hyphen.
for (const c of [0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad]) KIND[c] = INVISIBLE;

(function buildTables() {
  const a = 'a'.charCodeAt(0);
  for (let i = 0; i < 26; i++) {
    LETTER[0x41 + i] = a + i;
    LETTER[0x61 + i] = a + i;
    LETTER[0xff21 + i] = a + i; // full-width
    LETTER[0xff41 + i] = a + i;
  }
  // Latin letters with diacritics: their base letter.
  for (let c = 0xc0; c <= 0x24f; c++) {
    const base = String.fromCharCode(c).normalize('NFD').charCodeAt(0);
    if (base < 128 && LETTER[base]) LETTER[c] = LETTER[base];
  }
  const lookalikes: Record<string, string> = {
    а: 'a',
    в: 'b',
    е: 'e',
    к: 'k',
    м: 'm',
    н: 'h',
    о: 'o',
    р: 'p',
    с: 'c',
    т: 't',
    у: 'y',
    х: 'x',
    і: 'i',
    ј: 'j',
    ѕ: 's',
    α: 'a',
    ε: 'e',
    ι: 'i',
    κ: 'k',
    ν: 'v',
    ο: 'o',
    ρ: 'p',
    τ: 't',
    υ: 'u',
  };
  for (const [from, to] of Object.entries(lookalikes)) {
    LETTER[from.charCodeAt(0)] = to.charCodeAt(0);
    LETTER[from.toUpperCase().charCodeAt(0)] = to.charCodeAt(0);
  }
  LETTER['l'.charCodeAt(0)] = LETTER['L'.charCodeAt(0)] = 'i'.charCodeAt(0);
  for (const [from, to] of Object.entries({
    0: 'o',
    1: 'i',
    3: 'e',
    4: 'a',
    5: 's',
    7: 't',
    '@': 'a',
    $: 's',
    '!': 'i',
    '|': 'i',
  })) {
    LEET[from.charCodeAt(0)] = to.charCodeAt(0);
  }
})();

const SPACE = 0x20;
// normalize() writes these as literals (see there).
if (ROOT !== 32 || DEAD !== 0 || END !== 1 || BOUNDARY !== 2 || ROW !== -32)
  throw new Error('leading-words.ts constants changed');

/** Folds a phrase pattern's literal letters the way the text is folded (`l` → `i`). */
export function foldPattern(source: string): string {
  return source.replace(/l/g, 'i');
}

/**
 * Normalized text, and where each of its characters came from. Every character of the original
 * is either written (a letter, or one space for a run of separators) or dropped, so normalized
 * character i comes from original character i + (characters dropped before it): the pass notes
 * only the drops (few in ordinary text: the separators after the first of a run), not an offset
 * per character, and a position is looked up when a match needs it. Joining spelled-out letters
 * removes written spaces as well; that rare case keeps an offset per character.
 */
export class Normalized {
  /** Normalized index of the character following each drop, ascending (one entry per drop). */
  readonly #drops?: number[];
  readonly #offsets?: Int32Array;

  constructor(
    /** Lower-case letters a-z and single spaces. */
    readonly text: string,
    /** Where phrase leads are: pairs (word start, trie entry), see leading-words.ts. */
    readonly leadHits: number[],
    where: { drops: number[] } | { offsets: Int32Array },
  ) {
    if ('drops' in where) this.#drops = where.drops;
    else this.#offsets = where.offsets;
  }

  /** Index in the original text of normalized character i. */
  originalIndex(i: number): number {
    if (this.#offsets) return this.#offsets[i];
    const drops = this.#drops as number[];
    // Drops noted at or before i: the first entry greater than i, by binary search.
    let lo = 0;
    let hi = drops.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (drops[mid] <= i) lo = mid + 1;
      else hi = mid;
    }
    return i + lo;
  }
}

/** Texts up to this length reuse one pair of buffers; longer ones get their own. */
const SHARED_MAX = 64 * 1024;
const littleEndian = endianness() === 'LE';

/**
 * The buffers of a pass: the text's UTF-16 code units (written natively by Buffer#write, so the
 * loop reads an array rather than calling charCodeAt per character, about twice as fast), and the
 * normalized characters (a-z and space, so one byte each: latin1 makes the string natively).
 */
class Buffers {
  readonly units: Uint16Array;
  readonly codes: Uint8Array;
  readonly #unitBytes: Buffer;
  readonly #codeBytes: Buffer;

  constructor(readonly capacity: number) {
    this.#unitBytes = Buffer.allocUnsafeSlow(capacity * 2);
    this.units = new Uint16Array(this.#unitBytes.buffer, this.#unitBytes.byteOffset, capacity);
    this.#codeBytes = Buffer.allocUnsafeSlow(capacity);
    this.codes = new Uint8Array(this.#codeBytes.buffer, this.#codeBytes.byteOffset, capacity);
  }

  /** Copies the text's code units into `units`. */
  load(text: string): void {
    if (littleEndian) this.#unitBytes.write(text, 0, 'utf16le');
    else for (let i = 0; i < text.length; i++) this.units[i] = text.charCodeAt(i);
  }

  /** The first `len` normalized characters as a string. */
  text(len: number): string {
    return this.#codeBytes.toString('latin1', 0, len);
  }
}

let shared = new Buffers(4096);

export function normalizeForPhrases(text: string): Normalized {
  const n = text.length;
  let buffers = shared;
  if (n > SHARED_MAX) buffers = new Buffers(n);
  else if (shared.capacity < n) {
    shared = new Buffers(Math.min(SHARED_MAX, 2 ** Math.ceil(Math.log2(n))));
    buffers = shared;
  }
  buffers.load(text);
  return normalize(buffers, n);
}

/** One pass over the text's `n` code units into the normalized characters (see the top of the file). */
function normalize(buffers: Buffers, n: number): Normalized {
  // Locals, and literals for the numbers: in V8's optimized code a module-level binding costs a
  // load and a check at each use, and a literal folds into the arithmetic.
  const units = buffers.units;
  const codes = buffers.codes;
  const letter = LETTER;
  const leet = LEET;
  const kinds = KIND;
  const space = 0x20; // SPACE
  const a = 0x61;
  const root = 32; // ROOT, DEAD, END, BOUNDARY, ROW: see leading-words.ts
  const dead = 0;
  const end = 1;
  const boundary = 2;
  const rowMask = -32;
  const joiner = 1; // JOINER, INVISIBLE
  const invisible = 2;
  const rows = PHRASE_LEADS.rows;
  /** Pairs (word start, trie entry) where a lead ends; triples (word start, entry, next word) to go on with. */
  const hits: number[] = [];
  const pending: number[] = [];
  const drops: number[] = [];
  let entry = root;
  let len = 0;
  /** LETTER of the previous character, for leetspeak: 0 when it is not a letter. */
  let previous = 0;
  /** Single-letter words in a row so far, and whether three occurred (`i g n o r e`). */
  let singles = 0;
  let spelledOut = false;
  let wordStart = 0;
  for (let i = 0; i < n; i++) {
    const c = units[i];
    const l = letter[c];
    let out = l;
    if (l === 0 && c < 128 && leet[c] !== 0 && (previous !== 0 || (i + 1 < n && letter[units[i + 1]] !== 0))) {
      out = leet[c];
    }
    previous = l;
    if (out !== 0) {
      if (entry !== dead) {
        entry = rows[(entry & rowMask) + out - a];
        if ((entry & end) !== 0) hits.push(wordStart, entry);
      }
      codes[len++] = out;
      continue;
    }
    const kind = kinds[c];
    // An invisible character, or a joiner between letters (or leet letters) inside a word: dropped.
    if (
      kind === invisible ||
      (kind === joiner && len > 0 && codes[len - 1] !== space && nextIsLetter(units, i + 1, n))
    ) {
      drops.push(len);
      continue;
    }
    if (len > 0 && codes[len - 1] !== space) {
      if (len - wordStart === 1) {
        if (++singles >= 3) spelledOut = true;
      } else singles = 0;
      codes[len++] = space;
      // A lead of several words goes on after this space: the walk resumes once the text is built.
      if ((entry & boundary) !== 0) pending.push(wordStart, entry, len);
      wordStart = len;
      entry = root;
    } else drops.push(len); // a separator after a space (or at the start): one space stands for the run
  }
  if (len > 0 && codes[len - 1] === space) len--;
  else if (len > 0 && len - wordStart === 1 && singles >= 2) spelledOut = true; // a run ending the text
  if (spelledOut) {
    // Joining letters changes the words: look for leads again.
    const joined = joinSpelledOut(buffers, offsetsOf(drops, len), len);
    return new Normalized(joined.text, PHRASE_LEADS.scan(joined.text), { offsets: joined.offsets });
  }
  const normalized = buffers.text(len);
  for (let p = 0; p < pending.length; p += 3)
    PHRASE_LEADS.walk(normalized, pending[p], pending[p + 1], pending[p + 2], hits);
  return new Normalized(normalized, hits, { drops });
}

/** The original index of each of `len` normalized characters, from the drops. */
function offsetsOf(drops: number[], len: number): Int32Array {
  const offsets = new Int32Array(len);
  let d = 0;
  for (let k = 0; k < len; k++) {
    while (d < drops.length && drops[d] <= k) d++;
    offsets[k] = k + d;
  }
  return offsets;
}

/** Whether code unit i (of n) is a letter or a leet character followed by a letter. */
function nextIsLetter(units: Uint16Array, i: number, n: number): boolean {
  if (i >= n) return false;
  const c = units[i];
  if (LETTER[c] !== 0) return true;
  return c < 128 && LEET[c] !== 0 && i + 1 < n && LETTER[units[i + 1]] !== 0;
}

/**
 * Removes the spaces inside runs of three or more single letters: `i g n o r e` → `ignore`. In
 * place: the output never gets ahead of the input.
 */
function joinSpelledOut(buffers: Buffers, offsets: Int32Array, len: number): { text: string; offsets: Int32Array } {
  const codes = buffers.codes;
  let o = 0;
  let i = 0;
  while (i < len) {
    // Count a run of single letters: positions i, i+2, i+4... each a letter between spaces/edges.
    let run = 0;
    let j = i;
    while (
      j < len &&
      codes[j] !== SPACE &&
      (j + 1 === len || codes[j + 1] === SPACE) &&
      (j === 0 || codes[j - 1] === SPACE)
    ) {
      run++;
      j += 2;
    }
    if (run >= 3) {
      for (let k = 0; k < run; k++) {
        codes[o] = codes[i + 2 * k];
        offsets[o++] = offsets[i + 2 * k];
      }
      i += 2 * run - 1; // at the space after the run (or past the end)
      continue;
    }
    codes[o] = codes[i];
    offsets[o++] = offsets[i];
    i++;
  }
  return { text: buffers.text(o), offsets };
}
