/**
 * A small vocabulary for phrase patterns over normalized text (see normalize.ts): lower-case
 * letters and single spaces. Words may run together in that text (punctuation inside words is
 * dropped), so the space between words of a phrase is optional.
 *
 *   phrase([any('ignore | disregard'), upTo(3, any('all | the')), any('instructions | rules')])
 *
 * Each alternative is a literal word or words, so repetitions are unambiguous and matching stays
 * linear; `l` is folded to `i` like the text.
 */
import type { Finding, TextView } from './detector.ts';
import { foldPattern } from './normalize.ts';

export interface Part {
  src: string;
  optional: boolean;
}

/** One of several words or multi-word expressions; an argument may list several, `a | b c | d`. */
export function any(...alternatives: string[]): Part {
  const words = alternatives.flatMap((a) => a.split('|')).map((a) => a.trim().split(/\s+/).join(' ?'));
  return { src: `(?:${words.join('|')})`, optional: false };
}

/** An optional part. */
export function opt(part: Part): Part {
  return { src: `(?:${part.src} ?)?`, optional: true };
}

/** Zero to n occurrences of a part (filler words such as "all of the"). */
export function upTo(n: number, part: Part): Part {
  return { src: `(?:${part.src} ?){0,${n}}`, optional: true };
}

export interface PhraseOptions {
  /** Require the phrase to end at a word boundary (for short final words such as names). */
  wholeWord?: boolean;
}

/** Parts in sequence, starting at a word boundary; a string part is one literal word or words. */
export function phrase(parts: Array<Part | string>, options: PhraseOptions = {}): string {
  let src = '\\b';
  parts.forEach((p, i) => {
    const part = typeof p === 'string' ? any(p) : p;
    // Optional parts carry their own trailing optional space.
    src += part.optional || i === parts.length - 1 ? part.src : `${part.src} ?`;
  });
  return options.wholeWord ? `${src}\\b` : src;
}

/** Phrases that carry one weight, compiled to a single regex. */
export interface PhraseGroup {
  weight: number;
  phrases: string[];
}

/** Finds matches of phrase groups in the normalized text, mapped back to original spans. */
export function phraseFinder(label: string, groups: PhraseGroup[]): (view: TextView) => Finding[] {
  const compiled = groups.map((g) => ({
    weight: g.weight,
    re: new RegExp(foldPattern(g.phrases.join('|')), 'g'),
  }));
  return (view) => {
    const { text, offsets } = view.normalized;
    const out: Finding[] = [];
    for (const { weight, re } of compiled) {
      re.lastIndex = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        let end = m.index + m[0].length;
        while (end > m.index && text.charCodeAt(end - 1) === 0x20) end--; // trailing optional space
        if (end === m.index) {
          re.lastIndex++;
          continue;
        }
        out.push({ start: offsets[m.index], end: offsets[end - 1] + 1, label, weight });
      }
    }
    return out;
  };
}
