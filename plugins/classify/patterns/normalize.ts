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
 * folding (see `foldPattern`). `offsets[i]` is the index in the original text of normalized
 * character `i`, so matches map back to spans of the original.
 */

export interface Normalized {
  text: string;
  offsets: Int32Array;
}

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
/** Builds strings from UTF-16 code units natively (String.fromCharCode.apply is slow on long runs). */
const utf16 = new TextDecoder('utf-16le');

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

/** Folds a phrase pattern's literal letters the way the text is folded (`l` → `i`). */
export function foldPattern(source: string): string {
  return source.replace(/l/g, 'i');
}

export function normalizeForPhrases(text: string): Normalized {
  const n = text.length;
  const codes = new Uint16Array(n);
  const offsets = new Int32Array(n);
  let len = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    let out = LETTER[c];
    if (
      out === 0 &&
      c < 128 &&
      LEET[c] !== 0 &&
      ((i > 0 && LETTER[text.charCodeAt(i - 1)] !== 0) || (i + 1 < n && LETTER[text.charCodeAt(i + 1)] !== 0))
    ) {
      out = LEET[c];
    }
    if (out !== 0) {
      codes[len] = out;
      offsets[len++] = i;
      continue;
    }
    const kind = KIND[c];
    if (kind === INVISIBLE) continue;
    // A joiner between letters (or leet letters) inside a word disappears.
    if (kind === JOINER && len > 0 && codes[len - 1] !== SPACE && nextIsLetter(text, i + 1)) continue;
    if (len > 0 && codes[len - 1] !== SPACE) {
      codes[len] = SPACE;
      offsets[len++] = i;
    }
  }
  if (len > 0 && codes[len - 1] === SPACE) len--;
  return joinSpelledOut(codes, offsets, len);
}

/** Whether the character at i is a letter or a leet character followed by a letter. */
function nextIsLetter(text: string, i: number): boolean {
  if (i >= text.length) return false;
  const c = text.charCodeAt(i);
  if (LETTER[c] !== 0) return true;
  return c < 128 && LEET[c] !== 0 && i + 1 < text.length && LETTER[text.charCodeAt(i + 1)] !== 0;
}

/** Removes the spaces inside runs of three or more single letters: `i g n o r e` → `ignore`. */
function joinSpelledOut(codes: Uint16Array, offsets: Int32Array, len: number): Normalized {
  if (!hasSpelledOutRun(codes, len)) {
    return { text: utf16.decode(codes.subarray(0, len)), offsets: offsets.subarray(0, len) };
  }
  const outCodes = new Uint16Array(len);
  const outOffsets = new Int32Array(len);
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
        outCodes[o] = codes[i + 2 * k];
        outOffsets[o++] = offsets[i + 2 * k];
      }
      i += 2 * run - 1; // at the space after the run (or past the end)
      continue;
    }
    outCodes[o] = codes[i];
    outOffsets[o++] = offsets[i];
    i++;
  }
  return { text: utf16.decode(outCodes.subarray(0, o)), offsets: outOffsets.subarray(0, o) };
}

/** Whether three single letters in a row (`x y z`) occur: the common text has none to join. */
function hasSpelledOutRun(codes: Uint16Array, len: number): boolean {
  let run = 0;
  for (let j = 0; j < len; j++) {
    if (codes[j] === SPACE) continue;
    const single = (j === 0 || codes[j - 1] === SPACE) && (j + 1 === len || codes[j + 1] === SPACE);
    if (!single) {
      run = 0;
      continue;
    }
    if (++run >= 3) return true;
  }
  return false;
}
