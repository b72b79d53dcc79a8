/**
 * What a Tier A detector is: a named, deterministic finder of one kind of thing in a text (an
 * e-mail address, an AWS key, "ignore previous instructions"...), belonging to a family.
 * Every detector runs in time linear in the text: its regexes have bounded or unambiguous
 * repetitions and start only at the beginning of a run of their characters, and anything costlier
 * (a checksum, a JSON decode) runs on the few candidates only.
 */
import { type Normalized, normalizeForPhrases } from './normalize.ts';

export const FAMILIES = ['pii', 'secrets', 'prompt_injection', 'jailbreak'] as const;
export type Family = (typeof FAMILIES)[number];

/** A span found by a detector, with how strongly this one match indicates the family (0..1). */
export interface Finding {
  start: number;
  end: number;
  /** Placeholder type, e.g. EMAIL. */
  label: string;
  weight: number;
}

export interface Detector {
  /** Unique across families, e.g. `email`, `aws_access_key`, `ignore_instructions`. */
  id: string;
  family: Family;
  description: string;
  find(view: TextView): Finding[];
}

/** The text under classification, with derived forms computed once and shared by detectors. */
export class TextView {
  #normalized?: Normalized;
  constructor(readonly text: string) {}

  /** Lower-cased, de-obfuscated form for phrase matching (see normalize.ts). */
  get normalized(): Normalized {
    this.#normalized ??= normalizeForPhrases(this.text);
    return this.#normalized;
  }
}

/** Every match of a global regex, mapped to findings; `accept` may refine or reject a match. */
export function findAll(
  text: string,
  re: RegExp,
  label: string,
  weight: number,
  accept?: (m: RegExpExecArray) => { start: number; end: number } | boolean,
): Finding[] {
  const out: Finding[] = [];
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    const verdict = accept ? accept(m) : true;
    if (verdict === false) continue;
    const range = verdict === true ? { start: m.index, end: m.index + m[0].length } : verdict;
    out.push({ start: range.start, end: range.end, label, weight });
  }
  return out;
}
