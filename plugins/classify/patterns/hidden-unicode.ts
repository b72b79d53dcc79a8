/**
 * Hidden-text detectors (family `hidden_text`), Unicode part: characters that show a human
 * reviewer nothing, or something else than what a model reads. Tool poisoning and indirect
 * prompt injection use them to carry instructions past the person who approves a tool or reads a
 * result:
 *
 * - Unicode tag characters (U+E0000–E007F), "ASCII smuggling": each one spells an ASCII character
 *   that renders as nothing, and models read them. Their one legitimate use is an emoji
 *   subdivision flag (🏴 + a region code in tags + CANCEL TAG, UTS #51), which is left alone.
 * - Runs of invisible characters: zero-width space/joiners, word joiner, invisible operators,
 *   BOM, Mongolian vowel separator, soft hyphen, Hangul fillers, and variation selectors used as
 *   data (a base character takes one selector; a run of them carries bytes, one per selector).
 *   Emoji ZWJ sequences (VS16 then ZWJ), Persian ZWNJ, Indic ZWJ, CJK ideographic variation
 *   selectors each put one or two in a row; a run of four, or three selectors, is data.
 * - Bidirectional overrides (U+202D/202E), which reverse what a reader sees ("Trojan Source",
 *   CVE-2021-42574), and embeddings/isolates left open at the end of their paragraph, which
 *   reorder the rest of it (closers that close nothing, weakly). Marks (LRM, RLM, ALM) and paired
 *   isolates, which right-to-left text and localized strings use, are not flagged.
 *
 * Each scans the text once; `find` skips to the first character that can start a finding
 * (indexOf or one character-class regex), `reference` walks every code unit.
 */
import { type Detector, EVIDENCE_CHARS, type Finding, pushFinding } from './detector.ts';

const LABEL = 'HIDDEN_TEXT';

/** A finding whose first piece carries `evidence` (a long match is reported in pieces). */
function pushWithEvidence(
  out: Finding[],
  start: number,
  end: number,
  weight: number,
  max: number,
  evidence: string | undefined,
): void {
  const first = out.length;
  pushFinding(out, start, end, LABEL, weight, max);
  if (evidence) out[first].evidence = evidence;
}

function clip(text: string): string {
  return text.length > EVIDENCE_CHARS ? `${text.slice(0, EVIDENCE_CHARS - 1)}…` : text;
}

// ---------------------------------------------------------------- tag characters

/** U+E0000–E007F in UTF-16: the high surrogate U+DB40, then U+DC00–DC7F. */
const TAG_HIGH = 0xdb40;
const isTagAt = (text: string, i: number) => {
  if (text.charCodeAt(i) !== TAG_HIGH) return false;
  const low = text.charCodeAt(i + 1);
  return low >= 0xdc00 && low <= 0xdc7f;
};
/** The tag's ASCII value (0–127). */
const tagValue = (text: string, i: number) => text.charCodeAt(i + 1) - 0xdc00;
const CANCEL_TAG = 0x7f;
/** 🏴 (U+1F3F4), the base of every subdivision flag. */
const isFlagBaseBefore = (text: string, i: number) =>
  i >= 2 && text.charCodeAt(i - 2) === 0xd83c && text.charCodeAt(i - 1) === 0xdff4;
const isFlagTag = (v: number) => (v >= 0x30 && v <= 0x39) || (v >= 0x61 && v <= 0x7a);
/** A flag's tags: a region and a subdivision, 3 to 6 lower-case letters and digits (`gbsct`). */
const FLAG_TAGS = 6;
/** The subdivision flags platforms show (RGI, Unicode 15): not reported at all. */
const RGI_FLAGS = new Set(['gbeng', 'gbsct', 'gbwls']);

/** The ASCII a stretch of tag characters spells (controls and CANCEL TAG left out). */
function decodeTags(text: string, start: number, end: number): string {
  let s = '';
  for (let i = start; i < end && s.length <= EVIDENCE_CHARS; i += 2) {
    const v = tagValue(text, i);
    if (v >= 0x20 && v < CANCEL_TAG) s += String.fromCharCode(v);
  }
  return clip(s);
}

/** 256 tag characters: a longer run is reported in pieces (each piece of whole characters). */
const TAGS_MAX = 512;
/** Seven tags: more than a flag's six, or one that is not a flag's. */
const TAGS_DETECT = 14;

/**
 * The run of tag characters at `start` (maximal), as findings: a flag (🏴, at most six letters or
 * digits, CANCEL TAG) is nothing when platforms show it, weak (0.3) otherwise, as is the start of
 * one the end of the run cuts short; anything else is hidden ASCII (0.9), its decoded text the
 * evidence. Returns where the run ends.
 */
function tagRun(text: string, start: number, out: Finding[]): number {
  let end = start;
  while (isTagAt(text, end)) end += 2;
  let from = start;
  if (isFlagBaseBefore(text, start)) {
    let k = start;
    while (k < end && (k - start) / 2 < FLAG_TAGS && isFlagTag(tagValue(text, k))) k += 2;
    if (k < end && tagValue(text, k) === CANCEL_TAG) {
      const region = decodeTags(text, start, k);
      if (!RGI_FLAGS.has(region)) pushWithEvidence(out, start, k + 2, 0.3, TAGS_MAX, region);
      from = k + 2;
    } else if (k === end) {
      pushWithEvidence(out, start, end, 0.3, TAGS_MAX, decodeTags(text, start, end));
      from = end;
    }
  }
  if (from < end) pushWithEvidence(out, from, end, 0.9, TAGS_MAX, decodeTags(text, from, end));
  return end;
}

function findTags(text: string, first: number): Finding[] {
  const out: Finding[] = [];
  for (let i = first; i !== -1 && i < text.length; ) {
    if (isTagAt(text, i)) i = tagRun(text, i, out);
    else i = text.indexOf('\uDB40', i + 1);
  }
  return out;
}

const unicodeTags: Detector = {
  id: 'unicode_tags',
  family: 'hidden_text',
  description: 'Unicode tag characters spelling hidden ASCII ("ASCII smuggling"), outside emoji subdivision flags.',
  maxSpanChars: TAGS_MAX,
  detectChars: TAGS_DETECT,
  find: (view) => findTags(view.text, view.text.indexOf('\uDB40')),
  reference: (view) => {
    const text = view.text;
    const out: Finding[] = [];
    for (let i = 0; i < text.length; ) i = isTagAt(text, i) ? tagRun(text, i, out) : i + 1;
    return out;
  },
};

// ---------------------------------------------------------------- invisible runs

/** Invisible characters of one code unit (variation selectors FE00–FE0F among them). */
const INVISIBLE = new Uint8Array(0x10000);
const VS = 2; // a variation selector
for (const c of [0x00ad, 0x034f, 0x115f, 0x1160, 0x180e, 0x200b, 0x200c, 0x200d, 0x3164, 0xfeff, 0xffa0]) {
  INVISIBLE[c] = 1;
}
for (let c = 0x2060; c <= 0x2064; c++) INVISIBLE[c] = 1;
for (let c = 0xfe00; c <= 0xfe0f; c++) INVISIBLE[c] = VS;
/** The first character of a possible run: the same set, and VS17–VS256 (U+E0100–E01EF). */
const INVISIBLE_START =
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: code units on purpose (no `u` flag): a low surrogate after U+DB40
  /[\u00AD\u034F\u115F\u1160\u180E\u200B-\u200D\u2060-\u2064\u3164\uFE00-\uFE0F\uFEFF\uFFA0]|\uDB40[\uDD00-\uDDEF]/g;

/** Code units of the invisible character at i: 1, 2 (a supplementary variation selector), or 0. */
function invisibleAt(text: string, i: number): number {
  if (i >= text.length) return 0;
  const c = text.charCodeAt(i);
  if (INVISIBLE[c] !== 0) return 1;
  if (c !== TAG_HIGH) return 0;
  const low = text.charCodeAt(i + 1);
  return low >= 0xdd00 && low <= 0xddef ? 2 : 0;
}

/** A run of this many invisible characters, or of this many variation selectors, is data. */
const RUN_CHARS = 4;
const RUN_SELECTORS = 3;
/** 512 code units; a longer run is reported in pieces. */
const RUN_MAX = 512;
/** Four characters of up to two code units each. */
const RUN_DETECT = 8;

/**
 * The bytes a run of variation selectors carries (VS1–16: 0–15, VS17–256: 16–255), as UTF-8 text
 * when it reads as text (no controls but blanks), else undefined.
 */
function decodeSelectors(text: string, start: number, end: number): string | undefined {
  const bytes: number[] = [];
  for (let i = start; i < end && bytes.length < 4 * EVIDENCE_CHARS; ) {
    const c = text.charCodeAt(i);
    if (c >= 0xfe00 && c <= 0xfe0f) bytes.push(c - 0xfe00);
    else if (c === TAG_HIGH) bytes.push(text.charCodeAt(i + 1) - 0xdd00 + 16);
    i += c === TAG_HIGH ? 2 : 1;
  }
  const decoded = Buffer.from(bytes).toString('utf8');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: controls are what tells bytes from text
  if (decoded.length === 0 || /[\u0000-\u0008\u000e-\u001f\ufffd]/.test(decoded)) return undefined;
  return clip(decoded);
}

/** The run of invisible characters at `start` (maximal) as a finding when it is data; returns its end. */
function invisibleRun(text: string, start: number, out: Finding[]): number {
  let end = start;
  let chars = 0;
  let selectors = 0;
  for (let n = invisibleAt(text, end); n !== 0; n = invisibleAt(text, end)) {
    if (n === 2 || INVISIBLE[text.charCodeAt(end)] === VS) selectors++;
    chars++;
    end += n;
  }
  if (chars >= RUN_CHARS || selectors >= RUN_SELECTORS) {
    const evidence = selectors >= RUN_SELECTORS ? decodeSelectors(text, start, end) : undefined;
    pushWithEvidence(out, start, end, 0.85, RUN_MAX, evidence);
  }
  return end;
}

const invisibleRunDetector: Detector = {
  id: 'invisible_run',
  family: 'hidden_text',
  description: 'A run of invisible characters (zero-width, word joiner, BOM…) or of variation selectors used as data.',
  maxSpanChars: RUN_MAX,
  detectChars: RUN_DETECT,
  find(view) {
    const text = view.text;
    const out: Finding[] = [];
    INVISIBLE_START.lastIndex = 0;
    for (let m = INVISIBLE_START.exec(text); m !== null; m = INVISIBLE_START.exec(text)) {
      INVISIBLE_START.lastIndex = invisibleRun(text, m.index, out);
    }
    return out;
  },
  reference(view) {
    const text = view.text;
    const out: Finding[] = [];
    for (let i = 0; i < text.length; ) i = invisibleAt(text, i) !== 0 ? invisibleRun(text, i, out) : i + 1;
    return out;
  },
};

// ---------------------------------------------------------------- bidi controls

const LRE = 0x202a;
const RLE = 0x202b;
const PDF = 0x202c;
const LRO = 0x202d;
const RLO = 0x202e;
const LRI = 0x2066;
const FSI = 0x2068;
const PDI = 0x2069;
/** The bidi controls and the paragraph separators that end their scope (UAX #9, class B). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+001C–001E are paragraph separators (class B)
const BIDI_OR_PARAGRAPH = /[\u202A-\u202E\u2066-\u2069\n\r\u001C-\u001E\u0085\u2029]/g;
const BIDI = /[\u202A-\u202E\u2066-\u2069]/;
const isParagraphEnd = (c: number) =>
  c === 0x0a || c === 0x0d || (c >= 0x1c && c <= 0x1e) || c === 0x85 || c === 0x2029;

/**
 * Walks the bidi controls from `from` (each at most once on the stack): an override is reported
 * where it stands (0.8); an embedding or isolate not closed by the end of its paragraph (or of
 * the text) where it stands, as strongly (0.8): it reorders everything after it up to the end of
 * the line, which is what Trojan Source (CVE-2021-42574) does with an isolate left open, and
 * software that writes isolates for right-to-left names closes them. A PDF or PDI that closes
 * nothing reorders nothing: weak (0.4). PDF closes the innermost embedding or override unless an
 * isolate is innermost; PDI closes the innermost isolate and whatever was opened inside it
 * (UAX #9, X6a, X7).
 */
function bidiControls(text: string, positions: Iterable<number>, stillOpen?: number[]): Finding[] {
  const out: Finding[] = [];
  /** Open embeddings, overrides and isolates: position, and whether an isolate. */
  const open: number[] = [];
  const isolate: boolean[] = [];
  let isolates = 0;
  /** An opener left open (an override was reported where it stands). */
  const unclosed = (at: number) => {
    const c = text.charCodeAt(at);
    if (c !== LRO && c !== RLO) out.push({ start: at, end: at + 1, label: LABEL, weight: 0.8 });
  };
  /** A closer that closes nothing. */
  const unpaired = (at: number) => out.push({ start: at, end: at + 1, label: LABEL, weight: 0.4 });
  const closeParagraph = () => {
    for (const at of open) unclosed(at);
    open.length = 0;
    isolate.length = 0;
    isolates = 0;
  };
  for (const i of positions) {
    const c = text.charCodeAt(i);
    if (isParagraphEnd(c)) {
      if (open.length > 0) closeParagraph();
      continue;
    }
    if (c === LRO || c === RLO) out.push({ start: i, end: i + 1, label: LABEL, weight: 0.8 });
    if (c === LRE || c === RLE || c === LRO || c === RLO || (c >= LRI && c <= FSI)) {
      const isIsolate = c >= LRI;
      open.push(i);
      isolate.push(isIsolate);
      if (isIsolate) isolates++;
    } else if (c === PDF) {
      if (open.length > 0 && !isolate[isolate.length - 1]) {
        open.pop();
        isolate.pop();
      } else unpaired(i);
    } else if (c === PDI) {
      if (isolates === 0) unpaired(i);
      else {
        while (!isolate[isolate.length - 1]) {
          open.pop();
          isolate.pop();
        }
        open.pop();
        isolate.pop();
        isolates--;
      }
    }
  }
  if (stillOpen) stillOpen.push(...open);
  closeParagraph();
  out.sort((a, b) => a.start - b.start);
  return out;
}

/**
 * From the first control the last paragraph leaves open: a closer may still come (and take its
 * finding away) or the paragraph end (and keep it).
 */
function bidiPending(text: string): number {
  const first = text.search(BIDI);
  if (first === -1) return text.length;
  const open: number[] = [];
  bidiControls(text, controlsFrom(text, first), open);
  return open.length > 0 ? open[0] : text.length;
}

/** Positions of bidi controls and paragraph ends from `from`, by the regex. */
function* controlsFrom(text: string, from: number): Generator<number> {
  const re = new RegExp(BIDI_OR_PARAGRAPH.source, 'g');
  re.lastIndex = from;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) yield m.index;
}

function* everyPosition(text: string): Generator<number> {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isParagraphEnd(c) || (c >= LRE && c <= RLO) || (c >= LRI && c <= PDI)) yield i;
  }
}

const bidiControl: Detector = {
  id: 'bidi_control',
  family: 'hidden_text',
  description:
    'Bidirectional overrides (Trojan Source), embeddings or isolates left open at the end of their paragraph, stray closers (weak).',
  maxSpanChars: 1, // one control character
  detectChars: 1, // an override or an opener at once (open at the end of the text too); a stray closer at once
  find(view) {
    const text = view.text;
    const first = text.search(BIDI);
    return first === -1 ? [] : bidiControls(text, controlsFrom(text, first));
  },
  reference: (view) => bidiControls(view.text, everyPosition(view.text)),
  pendingFrom: (view) => bidiPending(view.text),
};

export const hiddenUnicodeDetectors: Detector[] = [unicodeTags, invisibleRunDetector, bidiControl];
