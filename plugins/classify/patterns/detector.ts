/**
 * What a Tier A detector is: a named, deterministic finder of one kind of thing in a text (an
 * e-mail address, an AWS key, "ignore previous instructions"...), belonging to a family.
 * Every detector runs in time linear in the text: its regexes have bounded or unambiguous
 * repetitions and start only at the beginning of a run of their characters, and anything costlier
 * (a checksum, a JSON decode) runs on the few candidates only.
 */
import type { ClassifierTrigger } from '../api.ts';
import { type Normalized, normalizeForPhrases } from './normalize.ts';

export const FAMILIES = ['pii', 'secrets', 'prompt_injection', 'jailbreak', 'hidden_text'] as const;
export type Family = (typeof FAMILIES)[number];

/** A span found by a detector, with how strongly this one match indicates the family (0..1). */
export interface Finding {
  start: number;
  end: number;
  /** Placeholder type, e.g. EMAIL. */
  label: string;
  weight: number;
  /**
   * On the pieces of a match longer than its detector's `maxSpanChars` (see pushFinding): the
   * whole match, so that the classifier judges it as one (a match inside it is still nested).
   */
  whole?: { start: number; end: number };
  /**
   * What the match hides from a human reader, decoded (the ASCII that Unicode tag characters spell,
   * the bytes variation selectors carry), at most EVIDENCE_CHARS: the one piece of the text a
   * result carries, so that an audit shows what was hidden (ClassifierResult.evidence).
   */
  evidence?: string;
}

/** The longest evidence a finding carries (a longer payload is cut, with `…`). */
export const EVIDENCE_CHARS = 200;

export interface Detector {
  /** Unique across families, e.g. `email`, `aws_access_key`, `ignore_instructions`. */
  id: string;
  family: Family;
  description: string;
  /**
   * The longest span `find` (and `reference`) can report, in UTF-16 code units of the original
   * text: a stream that holds back this much sees every match of the detector whole before any
   * of it is sent. Bounded by the pattern itself where the thing has a bounded shape; where it
   * has none (a PEM block, a JWT, a phrase stretched by characters the normalizer drops) a
   * longer match is reported as consecutive pieces of at most this length (pushFinding).
   * docs/classifiers.md lists each value and why.
   */
  maxSpanChars: number;
  /**
   * How much of a match the detector must see before it reports it: for every text T and every
   * match M = [s, e) it reports on T as one span, the text cut anywhere from s + min(detectChars,
   * e - s) on (the text before M unchanged) still gets a finding of the detector that overlaps M,
   * with M's label and at least M's weight. A stream whose rules only block needs to hold back this
   * much, not maxSpanChars: a scan fires before any of the match is sent. At most maxSpanChars.
   * docs/classifiers.md lists each value and why.
   */
  detectChars: number;
  find(view: TextView): Finding[];
  /**
   * Where a stream may release up to: the earliest offset (original text, UTF-16 code units) from
   * which a match could still be completed, extended or changed by more text (`view.text.length`
   * when nothing is pending). For every text T and continuation X, every finding of `find` on
   * T + X that starts before `pendingFrom(T)` is a finding on T, and the reverse (a finding on T
   * starting before it does not go away). A stream releases text before the minimum over its
   * detectors, whole: released text is never part of a later match. Absent: the detector holds
   * its maxSpanChars (pendingOf). docs/classifiers.md, "Release points".
   */
  pendingFrom?(view: TextView): number;
  /**
   * The same search done the plain way, without the prefilters `find` uses to skip text that
   * cannot match (tests check that both agree); absent when `find` has none.
   */
  reference?(view: TextView): Finding[];
  /**
   * Detectors that share one search (the provider key formats, key-detectors.ts): a classifier
   * asks the group once per text instead of each member (a stream checks at every chunk, and
   * ~170 calls that find nothing cost more than the search).
   */
  group?: DetectorGroup;
  /**
   * What every ASCII text on which `find` reports anything (open or not) holds: one of `chars`,
   * one of `words` (any case), or a run of `run` characters that are not blanks. A classifier
   * whose detectors all have one skips their searches on an ASCII text holding none (most chunks
   * of prose in a stream); their release points are still asked. Absent: always searched.
   * test/plugins/classify-trigger.property.test.ts checks it for every detector that has one.
   */
  trigger?: Trigger;
}

/** A necessary condition for a detector's findings (Detector.trigger). */
export interface Trigger {
  chars?: string;
  words?: readonly string[];
  run?: number;
}

/**
 * One test for any detector's trigger, or a character outside ASCII (the triggers speak of ASCII
 * texts: a text with any other character is always searched): true when the text may have a
 * finding of one of them. Undefined when a detector has no trigger. One pass over the text's
 * character codes, a table saying what each one is (a regex of the same was 3x slower).
 */
export function compileTrigger(detectors: readonly Detector[]): ClassifierTrigger | undefined {
  // By character code: 0 part of a run, 1 a trigger, 2 a blank, 3 the first letter of a word.
  const kind = new Uint8Array(128);
  const words: string[][] = Array.from({ length: 128 }, () => []);
  let run = Number.POSITIVE_INFINITY;
  let longest = 1;
  for (let c = 9; c <= 13; c++) kind[c] = 2;
  kind[32] = 2;
  for (const d of detectors) {
    if (!d.trigger) return undefined;
    for (const ch of d.trigger.chars ?? '') kind[ch.charCodeAt(0)] = 1;
    for (const w of d.trigger.words ?? []) {
      const lower = w.toLowerCase();
      longest = Math.max(longest, lower.length);
      for (const c of new Set([lower.charCodeAt(0), lower.toUpperCase().charCodeAt(0)])) {
        if (!words[c]?.includes(lower)) words[c]?.push(lower);
      }
    }
    run = Math.min(run, d.trigger.run ?? Number.POSITIVE_INFINITY);
  }
  for (let c = 0; c < 128; c++) if (kind[c] === 0 && (words[c]?.length ?? 0) > 0) kind[c] = 3;
  const limit = Number.isFinite(run) ? run : 0x3fffffff;
  return {
    reach: Math.max(Number.isFinite(run) ? run : 1, longest) - 1,
    test(text) {
      let length = 0; // of the current run of characters that are not blanks
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c >= 128) return true;
        const k = kind[c];
        if (k === 2) {
          length = 0;
          continue;
        }
        if (k === 1 || ++length >= limit) return true;
        if (k === 3) {
          const list = words[c] as string[];
          for (let w = 0; w < list.length; w++) if (startsWithAnyCase(text, i, list[w] as string)) return true;
        }
      }
      return false;
    },
  };
}

/** Whether `lower` (lower-case ASCII) occurs in `text` at `at`, in any case. */
function startsWithAnyCase(text: string, at: number, lower: string): boolean {
  if (at + lower.length > text.length) return false;
  for (let k = 0; k < lower.length; k++) {
    const c = text.charCodeAt(at + k);
    if ((c >= 65 && c <= 90 ? c + 32 : c) !== lower.charCodeAt(k)) return false;
  }
  return true;
}

/** One search shared by several detectors (Detector.group). */
export interface DetectorGroup {
  /** False when no member can have a finding in the text (then each member's `find` is empty). */
  found(view: TextView): boolean;
  /**
   * For a selection of members: a function giving the least of their `pendingFrom` for a text,
   * computed in one pass (the same value as asking each one).
   */
  pending(members: readonly Detector[]): (view: TextView) => number;
}

/** The text under classification, with derived forms computed once and shared by detectors. */
export class TextView {
  #normalized?: Normalized;
  /** What `derived` computed: functions and their values, in turn (a few per text: a list beats a Map). */
  #derived?: unknown[];
  /**
   * `open`: the text may go on (a stream's window before its end). Detectors that report a match
   * the end of the text cuts short (a long JWT, a bearer credential, a BEGIN line) then do not:
   * the stream holds it (pendingFrom) and judges the completed match.
   */
  constructor(
    readonly text: string,
    readonly open = false,
  ) {}

  /** Lower-cased, de-obfuscated form for phrase matching (see normalize.ts). */
  get normalized(): Normalized {
    this.#normalized ??= normalizeForPhrases(this.text);
    return this.#normalized;
  }

  /** `derive(this)`, computed once per text for all the detectors that use it. */
  derived<T>(derive: (view: TextView) => T): T {
    const known = this.#derived;
    if (known !== undefined)
      for (let i = 0; i < known.length; i += 2) if (known[i] === derive) return known[i + 1] as T;
    const value = derive(this);
    // Read again: `derive` may have derived something itself.
    const list = this.#derived;
    if (list === undefined) this.#derived = [derive, value];
    else list.push(derive, value);
    return value;
  }

  /**
   * An open view of `text` for release points (Classifier.releasePoint), shared by the classifiers
   * a stream asks about the same text in turn (the last one made is kept): what one derived, the
   * next reads.
   */
  static openView(text: string): TextView {
    let view = lastOpen;
    if (view === undefined || view.text !== text) {
      view = new TextView(text, true);
      lastOpen = view;
    }
    return view;
  }
}

let lastOpen: TextView | undefined;

/**
 * Steps of work a hand-written scanner reports where the complexity tests cannot see them (a loop
 * over a typed array or over `text[i]`; reads through `charCodeAt` and regex searches are counted
 * by the tests themselves, test/helpers/work-count.ts). Only tests read it; it is never reset here.
 */
export const workCounter = { steps: 0 };

/**
 * Adds the finding [start, end) to `out`; a match longer than `max` as consecutive pieces of at
 * most `max` characters, each knowing the whole match. Redacting a whole text still masks all of
 * it; no reported span is longer than `max`.
 */
export function pushFinding(out: Finding[], start: number, end: number, label: string, weight: number, max: number) {
  if (end - start <= max) {
    out.push({ start, end, label, weight });
    return;
  }
  const whole = { start, end };
  for (let s = start; s < end; s += max) out.push({ start: s, end: Math.min(end, s + max), label, weight, whole });
}

/**
 * Every match of a global regex from `from` on (-1: none), mapped to findings; `accept` may refine
 * or reject a match. `from` is where a match can start at the earliest (see `firstAnchor`), so
 * that text which cannot match is not searched. A match longer than `max` is reported in pieces
 * (pushFinding).
 */
export function findAll(
  text: string,
  re: RegExp,
  label: string,
  weight: number,
  accept?: (m: RegExpExecArray) => { start: number; end: number } | boolean,
  from = 0,
  max = Number.POSITIVE_INFINITY,
): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  re.lastIndex = from;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    const verdict = accept ? accept(m) : true;
    if (verdict === false) continue;
    const range = verdict === true ? { start: m.index, end: m.index + m[0].length } : verdict;
    pushFinding(out, range.start, range.end, label, weight, max);
  }
  return out;
}

/**
 * A literal that a match of a pattern contains at most `offset` characters after its start:
 * `['AKIA', 0]`; `['_', 6]` for `ghp_...` and `github_pat_...`.
 */
export type Anchor = readonly [literal: string, offset: number];

/**
 * Where a match can start at the earliest, given anchors one of which every match contains: the
 * first occurrence of each, less its offset (-1 when none occurs, so nothing can match).
 * `indexOf` scans far faster than a regex that tries every position.
 */
export function firstAnchor(text: string, anchors: readonly Anchor[]): number {
  let first = -1;
  for (const [literal, offset] of anchors) {
    const at = text.indexOf(literal);
    if (at !== -1 && (first === -1 || at - offset < first)) first = Math.max(0, at - offset);
  }
  return first;
}

/** Where a stream may release up to for `detector` (Detector.pendingFrom, else its maxSpanChars held). */
export function pendingOf(detector: Detector, view: TextView): number {
  if (detector.pendingFrom) return detector.pendingFrom(view);
  return Math.max(0, view.text.length - detector.maxSpanChars);
}

/**
 * The first position at or after the start of the text's trailing run of `inRun` characters (at
 * most `max` back) where `canStart` holds; the text's length when none. For detectors whose
 * matches are runs of such characters starting with such a character: a match that more text can
 * still make, extend or undo touches the end of the text, so it starts in that run.
 */
export function trailingRun(
  text: string,
  inRun: (c: number) => boolean,
  canStart: (c: number) => boolean = inRun,
  max = Number.POSITIVE_INFINITY,
): number {
  const floor = Math.max(0, text.length - max);
  let start = text.length;
  while (start > floor && inRun(text.charCodeAt(start - 1))) start--;
  while (start < text.length && !canStart(text.charCodeAt(start))) start++;
  return start;
}

/**
 * The earliest start of a match of `prefixes` (a global regex matching every prefix of a match,
 * anchored with `$`, whose matches end in a letter, a digit, a space or `-`) that reaches the end
 * of the text, searched from `back` characters before it; the text's length when none.
 */
export function prefixFrom(text: string, prefixes: RegExp, back: number): number {
  // Every such pattern ends in a letter, a digit or a space: prose ending in punctuation skips it.
  const c = text.charCodeAt(text.length - 1);
  if (!((c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 32 || c === 45)) {
    return text.length;
  }
  prefixes.lastIndex = Math.max(0, text.length - back);
  const m = prefixes.exec(text);
  return m === null ? text.length : m.index;
}
