/**
 * The detectors of the provider key formats (key-formats.ts): one per format, sharing one scan.
 *
 * A key is one token of the characters keys are made of (the union of the formats' characters).
 * The scan reads the text once, run by run; a run shorter than the shortest key is skipped whole
 * (ordinary words), and in a longer one a key can start only at the run's start or after a
 * character that is not a letter, digit, `_` or `-`. There, the formats whose key can start with
 * that character are tried (a sticky regex, bounded: at most the format's longest key is read),
 * the boundary after the key is checked in code, then its checksum and the placeholder check.
 * Where several formats match at one place, those with the longest literal prefix are kept.
 * Every format's matches for a text are computed once (TextView.derived) for all its detectors.
 */
import type { Detector, DetectorGroup, Finding, TextView } from './detector.ts';
import { KEY_FORMATS, type KeyFormat } from './key-formats.ts';
import { type KeyPattern, parseKeyPattern } from './key-pattern.ts';
import { isPlaceholder } from './placeholders.ts';

interface Compiled {
  format: KeyFormat;
  pattern: KeyPattern;
  re: RegExp;
  /** Characters that may not follow a key (it would go on): letters, digits, `_`, `-`, and the
   * base64 characters `+ / =` when the format is base64. */
  after: Uint8Array;
  /** `chars` as a table, for pendingFrom. */
  chars: Uint8Array;
}

const table = (chars: Iterable<string>): Uint8Array => {
  const t = new Uint8Array(128);
  for (const c of chars) t[c.charCodeAt(0)] = 1;
  return t;
};
/** A key does not start after these: letters, digits, `_`, `-` (inside a word), `+` and `/` (inside base64). */
const BEFORE = table('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/');
const isIn = (t: Uint8Array, c: number) => c < 128 && t[c] === 1;

function compile(format: KeyFormat): Compiled {
  const pattern = parseKeyPattern(format.pattern);
  const after = table([...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-']);
  // Base64 (`+` among its characters): a following `+`, `/` or `=` would go on the key. A URL's
  // `/` alone does not (`…/bot<token>/sendMessage`).
  if (pattern.chars.has('+')) for (const c of '+/=') after[c.charCodeAt(0)] = 1;
  return { format, pattern, re: new RegExp(format.pattern, 'y'), after, chars: table(pattern.chars) };
}

export const COMPILED: readonly Compiled[] = KEY_FORMATS.map(compile);

/** The formats whose key can start with a character, by its code. */
const BY_FIRST = new Map<number, Compiled[]>();
for (const c of COMPILED) {
  for (const ch of c.pattern.first) {
    const code = ch.charCodeAt(0);
    BY_FIRST.set(code, [...(BY_FIRST.get(code) ?? []), c]);
  }
}
/** Characters a key is made of. */
const KEY_CHAR = table(COMPILED.flatMap((c) => [...c.pattern.chars]));
const MIN_LENGTH = Math.min(...COMPILED.map((c) => c.pattern.minLength));

/** The end of the key of format `c` starting at `at`, or -1: matched, bounded, checked, not a placeholder. */
function keyAt(text: string, at: number, c: Compiled, open: boolean): number {
  c.re.lastIndex = at;
  const m = c.re.exec(text);
  if (m === null) return -1;
  const end = at + m[0].length;
  if (end < text.length && isIn(c.after, text.charCodeAt(end))) return -1;
  // An open text (a stream) may go on: a key it ends with may still grow or stop being one; held
  // (pendingFrom), reported once what follows it is known.
  if (open && end === text.length) return -1;
  if (c.format.check && !c.format.check(m[0])) return -1;
  const random = m.groups?.s ?? m[0].slice(c.pattern.prefix.length);
  if (isPlaceholder(random)) return -1;
  if (c.format.loose && !(/[0-9]/.test(random) && /[A-Za-z]/.test(random))) return -1;
  return end;
}

/** The keys starting at `at` among `candidates`: those of the longest literal prefix. */
function keysAt(
  text: string,
  at: number,
  candidates: readonly Compiled[],
  room: number,
  out: Map<string, Finding[]>,
  open = false,
) {
  let best = -1;
  let found: Array<[Compiled, number]> = [];
  for (const c of candidates) {
    if (c.pattern.minLength > room || c.pattern.prefix.length < best) continue;
    const end = keyAt(text, at, c, open);
    if (end < 0) continue;
    if (c.pattern.prefix.length > best) {
      best = c.pattern.prefix.length;
      found = [];
    }
    found.push([c, end]);
  }
  for (const [c, end] of found) {
    const list = out.get(c.format.id) ?? [];
    list.push({ start: at, end, label: c.format.label, weight: c.format.weight ?? 0.95 });
    out.set(c.format.id, list);
  }
}

/** Every format's keys in the text, by format id (see the top of the file). */
function scanKeys(view: TextView): Map<string, Finding[]> {
  const text = view.text;
  const out = new Map<string, Finding[]>();
  const n = text.length;
  let i = 0;
  while (i < n) {
    if (!isIn(KEY_CHAR, text.charCodeAt(i))) {
      i++;
      continue;
    }
    let end = i + 1;
    while (end < n && isIn(KEY_CHAR, text.charCodeAt(end))) end++;
    for (let p = i; p <= end - MIN_LENGTH; p++) {
      if (p > 0 && isIn(BEFORE, text.charCodeAt(p - 1))) continue;
      const candidates = BY_FIRST.get(text.charCodeAt(p));
      if (candidates) keysAt(text, p, candidates, end - p, out, view.open);
    }
    i = end;
  }
  return out;
}

/** The same, the plain way: every format tried at every position (tests compare the two). */
function scanKeysPlain(view: TextView): Map<string, Finding[]> {
  const text = view.text;
  const out = new Map<string, Finding[]>();
  for (let p = 0; p < text.length; p++) {
    if (p > 0 && isIn(BEFORE, text.charCodeAt(p - 1))) continue;
    keysAt(text, p, COMPILED, text.length - p, out, view.open);
  }
  return out;
}

/**
 * The earliest offset from which a key of `c` could still be completed by more text: the start of
 * the trailing token when what it holds from there is the start of such a key (its literal prefix
 * or a prefix of it, then only the format's characters, no longer than its longest key: a whole
 * key at the end may still grow, or stop being one), else the text's length. Errs early: a token
 * that can no longer become a key may still be held.
 */
function pendingFrom(c: Compiled, text: string): number {
  const n = text.length;
  const limit = Math.max(0, n - c.pattern.maxLength);
  let q = n; // the start of the trailing run of the format's characters (at most its longest key back)
  while (q > limit && isIn(c.chars, text.charCodeAt(q - 1))) q--;
  const prefix = c.pattern.prefix;
  for (let p = q; p < n; p++) {
    if (p > 0 && isIn(BEFORE, text.charCodeAt(p - 1))) continue;
    if (!c.pattern.first.has(text[p] as string)) continue;
    const rest = n - p;
    if (rest <= prefix.length ? prefix.startsWith(text.slice(p)) : text.startsWith(prefix, p)) return p;
  }
  return n;
}

/**
 * The least pendingFrom over the formats `byFirst` holds (by their keys' first characters), in one
 * pass: a position is a start for some format exactly when it starts the trailing run of that
 * format's characters or lies inside it (no further back than its longest key), follows no
 * character of BEFORE, and what follows it agrees with the format's literal prefix (as pendingFrom
 * asks of each). The first such position, from the left, is the least.
 */
function pendingFromAny(
  text: string,
  byFirst: ReadonlyMap<number, readonly Compiled[]>,
  chars: Uint8Array,
  maxLength: number,
): number {
  const n = text.length;
  const limit = Math.max(0, n - maxLength);
  let q = n; // the start of the trailing run of any selected format's characters
  while (q > limit && isIn(chars, text.charCodeAt(q - 1))) q--;
  for (let p = q; p < n; p++) {
    if (p > 0 && isIn(BEFORE, text.charCodeAt(p - 1))) continue;
    const candidates = byFirst.get(text.charCodeAt(p));
    if (candidates === undefined) continue;
    for (const c of candidates) {
      if (n - p > c.pattern.maxLength) continue;
      let k = p;
      while (k < n && isIn(c.chars, text.charCodeAt(k))) k++;
      if (k < n) continue; // not all of it is the format's characters
      const prefix = c.pattern.prefix;
      if (n - p <= prefix.length ? prefix.startsWith(text.slice(p)) : text.startsWith(prefix, p)) return p;
    }
  }
  return n;
}

/** The provider key formats as one group (DetectorGroup): one scan, one release point. */
const KEY_GROUP: DetectorGroup = {
  found: (view) => view.derived(scanKeys).size > 0,
  pending(members) {
    const selected = new Set(members.map((d) => d.id));
    const byFirst = new Map<number, Compiled[]>();
    const chars = new Uint8Array(128);
    let maxLength = 0;
    for (const c of COMPILED) {
      if (!selected.has(c.format.id)) continue;
      for (const ch of c.pattern.first) {
        const code = ch.charCodeAt(0);
        byFirst.set(code, [...(byFirst.get(code) ?? []), c]);
      }
      for (let i = 0; i < 128; i++) chars[i] |= c.chars[i];
      maxLength = Math.max(maxLength, c.pattern.maxLength);
    }
    return (view) => pendingFromAny(view.text, byFirst, chars, maxLength);
  },
};

function keyDetector(c: Compiled): Detector {
  const { format, pattern } = c;
  return {
    group: KEY_GROUP,
    // A key is a run of its characters, none of them blank, at least minLength long.
    trigger: { run: pattern.minLength },
    id: format.id,
    family: 'secrets',
    description: `${format.provider} ${format.what} (${format.docs}).`,
    // The span is the key; its whole is needed (a checksum, a fixed length, the placeholder check).
    maxSpanChars: pattern.maxLength,
    detectChars: pattern.maxLength,
    find: (view) => view.derived(scanKeys).get(format.id) ?? [],
    reference: (view) => view.derived(scanKeysPlain).get(format.id) ?? [],
    pendingFrom: (view) => pendingFrom(c, view.text),
  };
}

export const keyDetectors: Detector[] = COMPILED.map(keyDetector);

/** The format a value claims by its literal prefix (of 3+ characters) without being one of its keys, if any. */
export function failedFormat(value: string): KeyFormat | undefined {
  const candidates = BY_FIRST.get(value.charCodeAt(0)) ?? [];
  let claimed: KeyFormat | undefined;
  for (const c of candidates) {
    if (c.pattern.prefix.length < 3 || !value.startsWith(c.pattern.prefix)) continue;
    if (keyAt(value, 0, c, false) === value.length) return undefined;
    claimed ??= c.format;
  }
  return claimed;
}
