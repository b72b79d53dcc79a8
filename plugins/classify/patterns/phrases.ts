/**
 * A small vocabulary for phrase patterns over normalized text (see normalize.ts): lower-case
 * letters and single spaces. Words may run together in that text (punctuation inside words is
 * dropped), so the space between words of a phrase is optional.
 *
 *   phrase([any('ignore | disregard'), upTo(3, any('all | the')), any('instructions | rules')])
 *
 * Each alternative is a literal word or words (lower-case letters), so repetitions are unambiguous
 * and matching stays linear; `l` is folded to `i` like the text. From the same description each
 * phrase gets its leads, the word sequences its matches start with, which let ordinary text be
 * skipped (see leading-words.ts).
 */
import { type Detector, type Finding, pushFinding, type TextView } from './detector.ts';
import { PHRASE_LEADS } from './leading-words.ts';
import { foldPattern } from './normalize.ts';

/** Alternatives (each a list of words), repeated min to max times. */
export interface Part {
  src: string;
  alternatives: string[][];
  min: number;
  max: number;
  /** The most normalized characters a match of the part covers, its optional trailing spaces included. */
  maxChars: number;
}

/** One of several words or multi-word expressions; an argument may list several, `a | b c | d`. */
export function any(...alternatives: string[]): Part {
  const words = alternatives.flatMap((a) => a.split('|')).map((a) => a.trim().split(/\s+/));
  if (words.some((w) => w.some((word) => !/^[a-z]+$/.test(word)))) {
    throw new Error(`words must be lower-case letters: ${alternatives.join(' | ')}`);
  }
  const longest = Math.max(...words.map((w) => w.join(' ').length));
  return {
    src: `(?:${words.map((w) => w.join(' ?')).join('|')})`,
    alternatives: words,
    min: 1,
    max: 1,
    maxChars: longest,
  };
}

/** An optional part. */
export function opt(part: Part): Part {
  const { src, alternatives, maxChars } = single(part);
  return { src: `(?:${src} ?)?`, alternatives, min: 0, max: 1, maxChars: maxChars + 1 };
}

/** Zero to n occurrences of a part (filler words such as "all of the"). */
export function upTo(n: number, part: Part): Part {
  const { src, alternatives, maxChars } = single(part);
  return { src: `(?:${src} ?){0,${n}}`, alternatives, min: 0, max: n, maxChars: n * (maxChars + 1) };
}

function single(part: Part): Part {
  if (part.min !== 1 || part.max !== 1) throw new Error('opt() and upTo() take a part made with any()');
  return part;
}

export interface PhraseOptions {
  /** Require the phrase to end at a word boundary (for short final words such as names). */
  wholeWord?: boolean;
}

export interface Phrase {
  src: string;
  /** Word sequences every match starts with one of (see leadsOf). */
  leads: string[][];
  /** The most normalized characters a match covers (see Part.maxChars). */
  maxChars: number;
}

/** Parts in sequence, starting at a word boundary; a string part is one literal word or words. */
export function phrase(parts: Array<Part | string>, options: PhraseOptions = {}): Phrase {
  const all = parts.map((p) => (typeof p === 'string' ? any(p) : p));
  if (all.every((p) => p.min === 0)) throw new Error('a phrase needs a part that is not optional');
  let src = '\\b';
  let maxChars = 0;
  all.forEach((part, i) => {
    // Optional parts carry their own trailing optional space.
    const own = part.min === 0 || i === all.length - 1;
    src += own ? part.src : `${part.src} ?`;
    maxChars += own ? part.maxChars : part.maxChars + 1;
  });
  return { src: options.wholeWord ? `${src}\\b` : src, leads: leadsOf(all), maxChars };
}

/** Leads a phrase may have beyond its first required part: a bound on the size of the trie. */
const MAX_LEADS = 16;

/**
 * The word sequences a match of the parts starts with: every way through the parts up to the
 * first required one, then through further parts while there are at most MAX_LEADS ways, up to
 * the last required part reached (a trailing optional part narrows nothing).
 */
function leadsOf(parts: Part[]): string[][] {
  let ways: string[][] = [[]];
  let settled: string[][] | undefined;
  for (const part of parts) {
    let count = 0;
    for (let r = part.min; r <= part.max; r++) count += ways.length * part.alternatives.length ** r;
    if (settled !== undefined && count > MAX_LEADS) break;
    if (count > 4096) throw new Error('a phrase with that many ways to start needs a required part sooner');
    const next = part.min === 0 ? [...ways] : [];
    let layer = ways;
    for (let r = 1; r <= part.max; r++) {
      layer = layer.flatMap((way) => part.alternatives.map((words) => [...way, ...words]));
      if (r >= part.min) next.push(...layer);
    }
    ways = next;
    if (part.min > 0) settled = ways;
  }
  return settled ?? ways;
}

/** Phrases that carry one weight, compiled to a single regex. */
export interface PhraseGroup {
  weight: number;
  phrases: Phrase[];
}

/**
 * How much original text a phrase match may cover per normalized character of the longest match
 * its phrases allow, before its span is cut into pieces. Undoing an obfuscation drops a character
 * or two per letter (`i.g.n.o.r.e`, `i g n o r e`, a zero-width character after each letter: 2;
 * `I. G. N. O.`: 3), so 4 leaves room for some extra blanks as well. A phrase stretched further
 * (a run of invisible characters, pages of blank lines inside it) is still found; its span is
 * reported in pieces of at most the detector's maxSpanChars.
 */
const ORIGINAL_PER_NORMALIZED = 4;

/** Per text, the word starts where each group may match (see leading-words.ts). */
const groupStarts = (view: TextView) => PHRASE_LEADS.byGroup(view.normalized.leadHits);

/**
 * Finds matches of phrase groups in the normalized text, mapped back to original spans. Each
 * group's regex runs (sticky) only at the word starts where one of its leads is: every match
 * starts at one, so this finds what the plain search of the whole text (`reference`) finds.
 * maxSpanChars: ORIGINAL_PER_NORMALIZED × the longest normalized match of the groups' phrases;
 * detectChars the same: a phrase is found once its last word is there, and the start of a phrase
 * is no phrase ("ignore all previous" may go on "…errors").
 */
export function phraseFinder(
  label: string,
  groups: PhraseGroup[],
): Pick<Detector, 'find' | 'reference' | 'maxSpanChars' | 'detectChars' | 'pendingFrom'> {
  const longest = Math.max(...groups.flatMap((g) => g.phrases.map((p) => p.maxChars)));
  const max = ORIGINAL_PER_NORMALIZED * longest;
  // The letters every match starts with, one of these (spaces are optional between words).
  const leads = [
    ...new Set(groups.flatMap((g) => g.phrases.flatMap((p) => p.leads.map((lead) => foldPattern(lead.join('')))))),
  ];
  const compiled = groups.map((g) => {
    const src = foldPattern(g.phrases.map((p) => p.src).join('|'));
    return {
      weight: g.weight,
      id: PHRASE_LEADS.addGroup(g.phrases.flatMap((p) => p.leads.map((lead) => lead.map(foldPattern)))),
      sticky: new RegExp(src, 'y'),
      global: new RegExp(src, 'g'),
    };
  });
  return {
    find(view) {
      const byGroup = view.derived(groupStarts);
      const out: Finding[] = [];
      for (const { weight, id, sticky } of compiled) {
        const starts = byGroup[id];
        if (starts === undefined) continue;
        const { text } = view.normalized;
        let from = 0; // where the plain search would go on
        for (const start of starts) {
          if (start < from) continue;
          sticky.lastIndex = start;
          const m = sticky.exec(text);
          if (m === null) continue;
          from = start + m[0].length;
          pushPhrase(out, view, start, from, label, weight, max);
        }
      }
      return out;
    },
    reference(view) {
      const { text } = view.normalized;
      const out: Finding[] = [];
      for (const { weight, global: re } of compiled) {
        re.lastIndex = 0;
        for (let m = re.exec(text); m !== null; m = re.exec(text)) {
          pushPhrase(out, view, m.index, m.index + m[0].length, label, weight, max);
        }
      }
      return out;
    },
    maxSpanChars: max,
    detectChars: max,
    pendingFrom: (view) => phrasePending(view, leads, longest),
  };
}

/**
 * The longest suffix of the normalized text, from a word start, that may still be the start of
 * a match (or a match that more words may extend): its letters and a lead's agree as far as both
 * go. A pending match is at most `longest` normalized characters (twice that is looked at: the
 * end of the text may normalize differently once more comes, `i g n` → `ign…`).
 */
function phrasePending(view: TextView, leads: string[], longest: number): number {
  const { text } = view.normalized;
  const floor = Math.max(0, text.length - 2 * longest - 1);
  for (let i = floor; i < text.length; i++) {
    if (text.charCodeAt(i) === 0x20 || (i > 0 && text.charCodeAt(i - 1) !== 0x20)) continue;
    const letters = text.slice(i).replaceAll(' ', '');
    for (const lead of leads) {
      const n = Math.min(lead.length, letters.length);
      if (lead.slice(0, n) === letters.slice(0, n)) return view.normalized.originalIndex(i);
    }
  }
  return view.text.length;
}

/**
 * The finding for normalized characters [start, end), its trailing optional space left out, in
 * pieces of at most `max` original characters (pushFinding).
 */
function pushPhrase(
  out: Finding[],
  view: TextView,
  start: number,
  end: number,
  label: string,
  weight: number,
  max: number,
): void {
  const normalized = view.normalized;
  while (end > start && normalized.text.charCodeAt(end - 1) === 0x20) end--;
  pushFinding(out, normalized.originalIndex(start), normalized.originalIndex(end - 1) + 1, label, weight, max);
}
