/**
 * A Tier A classifier: a selection of detectors run over the text, their findings combined into
 * one score, label and confidence, with the spans to redact.
 *
 * - A detector's score is the highest weight among its matches (or the configured weight). A
 *   match lying inside a stronger match of another detector is dropped first (see withoutNested).
 * - The classifier's score combines the detectors that fired as independent evidence
 *   (noisy-OR: 1 - Π(1 - score)), so one strong match gives its own weight and corroborating
 *   matches push the score towards 1.
 * - label: the positive label when score ≥ threshold (configured, or that of the family of the
 *   strongest detector, ties going to the first in catalog order: pii, secret, injection,
 *   jailbreak, hidden_text), the negative one otherwise
 *   (configured, or that of the first selected family: clean or benign).
 * - confidence: score for a positive label, 1 - score for a negative one.
 * - maxSpanChars: the longest span of its detectors. Overlapping findings are merged into one
 *   span; a merged span longer than that is reported in pieces, like a long match.
 * - detectChars: the most its detectors must see of a match. A detector's finding on a text cut
 *   that far into a match weighs at least the match (Detector.detectChars); a finding is dropped
 *   only inside a stronger one, and the score is at least the strongest detector's, so the score
 *   on the cut text is at least the match's weight (as this classifier weighs it).
 */
import type {
  Classifier,
  ClassifierInfo,
  ClassifierResult,
  ClassifierTrigger,
  ClassifyOptions,
  OffLoopSpec,
  Span,
} from '../api.ts';
import { mergeSpans } from '../redact.ts';
import { FAMILY_LABELS, selectDetectors } from './catalog.ts';
import { compileTrigger, type Detector, type DetectorGroup, type Finding, pendingOf, TextView } from './detector.ts';
import { type CountryCode, PHONE_REGION_CODES, phoneDetector } from './phone.ts';

export interface PatternClassifierSpec {
  name: string;
  type: 'pattern';
  tier?: 'A' | 'B';
  /** Family names (`pii`, `secrets`, `prompt_injection`, `jailbreak`) and/or detector ids. */
  detectors: string[];
  threshold?: number;
  labels?: { positive?: string; negative?: string };
  /** Replaces the weight of every match of the given detectors. */
  weights?: Record<string, number>;
  /**
   * Regions (ISO 3166 alpha-2) whose national formats the `phone` detector recognises, instead
   * of DEFAULT_PHONE_REGIONS; international numbers (`+`, `00`) of every country are found anyway.
   */
  phone_regions?: string[];
}

export const DEFAULT_THRESHOLD = 0.5;

/** The classifier of `spec`, as the set's worker thread builds it for long texts (Classifier.offLoop). */
export function createOffLoop(spec: PatternClassifierSpec): PatternClassifier {
  return new PatternClassifier(spec);
}

export class PatternClassifier implements Classifier {
  readonly name: string;
  /** The longest span in a result: that of the detectors (each span is one match or a piece of one). */
  readonly maxSpanChars: number;
  /** The most its detectors must see of a match before they report it (see the top of the file). */
  readonly detectChars: number;
  readonly #tier: 'A' | 'B';
  readonly #detectors: Detector[];
  readonly #threshold: number;
  readonly #positive?: string;
  readonly #negative: string;
  readonly #weights: ReadonlyMap<string, number>;
  /** The groups among the detectors (Detector.group), each with the release point of its selected members. */
  readonly #groups: Array<{ group: DetectorGroup; pending: (view: TextView) => number }> = [];
  /** Per detector (same order): the index of its group in #groups, or -1. */
  readonly #groupOf: Int8Array;
  /** The release-point functions #pendingOnly asks, made once. */
  #releasePoints: Array<(view: TextView) => number> | undefined;
  /** The detail of a result where nothing was found: one, read-only. */
  #cleanDetail: Readonly<Record<string, unknown>> | undefined;
  /** A text it says false of has no finding of any detector (Detector.trigger); undefined: always search. */
  readonly trigger: ClassifierTrigger | undefined;
  /** Its scan grows with the text: a long text is classified by the same classifier in a worker. */
  readonly offLoop: OffLoopSpec | undefined;

  /**
   * `reference`: run each detector's plain search (`Detector.reference`) instead of the one with
   * prefilters; tests compare the two.
   */
  constructor(spec: PatternClassifierSpec, options: { reference?: boolean } = {}) {
    this.name = spec.name;
    // not the schema default: a classifier built from a spec outside the resource's options (tests, tools)
    this.#tier = spec.tier ?? 'A';
    this.#detectors = selectDetectors(spec.detectors);
    if (spec.phone_regions !== undefined) {
      const at = this.#detectors.findIndex((d) => d.id === 'phone');
      if (at === -1)
        throw new Error(`classifier "${spec.name}": phone_regions, but it does not use the phone detector`);
      const unknown = spec.phone_regions.filter((r) => !PHONE_REGION_CODES.includes(r));
      if (unknown.length > 0 || spec.phone_regions.length === 0) {
        throw new Error(
          `classifier "${spec.name}": phone_regions: ${unknown.length > 0 ? `unknown region ${unknown.map((r) => `"${r}"`).join(', ')} (ISO 3166 alpha-2 codes, upper case, e.g. US, GB, DE)` : 'empty'}`,
        );
      }
      this.#detectors[at] = phoneDetector(spec.phone_regions as CountryCode[]);
    }
    if (options.reference) {
      this.#detectors = this.#detectors.map((d) => (d.reference ? { ...d, find: d.reference } : d));
    }
    if (this.#detectors.length === 0) throw new Error(`classifier "${spec.name}": no detectors selected`);
    this.maxSpanChars = Math.max(...this.#detectors.map((d) => d.maxSpanChars));
    this.detectChars = Math.max(...this.#detectors.map((d) => d.detectChars));
    // not the schema default: the constructor's own, like tier above (specs built outside the resource)
    this.#threshold = spec.threshold ?? DEFAULT_THRESHOLD;
    this.#positive = spec.labels?.positive;
    this.#negative = spec.labels?.negative ?? FAMILY_LABELS[this.#detectors[0].family].negative;
    const selected = new Set(this.#detectors.map((d) => d.id));
    for (const id of Object.keys(spec.weights ?? {})) {
      if (!selected.has(id)) throw new Error(`classifier "${spec.name}": weight for "${id}", which it does not use`);
    }
    this.#weights = new Map(Object.entries(spec.weights ?? {}));
    // The reference search asks every detector itself.
    if (options.reference)
      for (const d of this.#detectors)
        if (d.group) this.#detectors[this.#detectors.indexOf(d)] = { ...d, group: undefined };
    this.trigger = options.reference ? undefined : compileTrigger(this.#detectors);
    this.offLoop = options.reference ? undefined : { module: import.meta.url, spec };
    this.#groupOf = new Int8Array(this.#detectors.length).fill(-1);
    for (const [i, d] of this.#detectors.entries()) {
      if (!d.group) continue;
      let at = this.#groups.findIndex((g) => g.group === d.group);
      if (at === -1) {
        const group = d.group;
        at = this.#groups.push({ group, pending: group.pending(this.#detectors.filter((m) => m.group === group)) }) - 1;
      }
      this.#groupOf[i] = at;
    }
  }

  /** Ids of the detectors this classifier runs. */
  get detectors(): string[] {
    return this.#detectors.map((d) => d.id);
  }

  info(): ClassifierInfo {
    return { name: this.name, tier: this.#tier, type: 'pattern', status: 'loaded' };
  }

  /** Patterns are compiled when the module loads and the detectors are chosen at construction. */
  async load(): Promise<void> {}

  async classify(text: string): Promise<ClassifierResult> {
    return this.classifySync(text);
  }

  classifySync(text: string, options?: ClassifyOptions): ClassifierResult {
    const open = options?.open === true;
    // A stream's text without any detector's trigger (it tested): only the release points to
    // ask, at most chunks of a stream; not timed (latency_ms 0), a clock read costs as much.
    if (options?.untriggered === true) {
      return this.#clean(undefined, open, open ? this.#pendingOnly(new TextView(text, true)) : text.length);
    }
    const started = performance.now();
    const view = new TextView(text, open);
    const found: Found[] = [];
    let pendingFrom = text.length;
    if (this.trigger !== undefined && !this.trigger.test(text)) {
      if (open) pendingFrom = this.#pendingOnly(view);
      return this.#clean(started, open, pendingFrom);
    }
    // A group is asked once: its release point, and whether any member can find anything.
    let quiet = 0; // bit g: group g finds nothing in this text
    for (let g = 0; g < this.#groups.length; g++) {
      const { group, pending } = this.#groups[g];
      if (open) pendingFrom = Math.min(pendingFrom, pending(view));
      if (!group.found(view)) quiet |= 1 << g;
    }
    const detectors = this.#detectors;
    for (let i = 0; i < detectors.length; i++) {
      const detector = detectors[i];
      const g = this.#groupOf[i];
      if (g !== -1 && (quiet & (1 << g)) !== 0) continue;
      // In an open text, a detector's findings that more text may still change wait (a stream
      // holds their text and judges them once they are settled). A group member's release point
      // is in its group's; its own is asked only when it found something.
      let pending = text.length;
      if (open && g === -1) {
        pending = pendingOf(detector, view);
        if (pending < pendingFrom) pendingFrom = pending;
      }
      const findings = detector.find(view);
      if (findings.length === 0) continue;
      if (open && g !== -1) pending = pendingOf(detector, view);
      const override = this.#weights.get(detector.id);
      for (const f of findings) {
        if (f.start >= pending) continue;
        found.push({ ...f, weight: override ?? f.weight, detector });
      }
    }
    // The common case: nothing found, nothing to combine.
    if (found.length === 0) return this.#clean(started, open, pendingFrom);
    const spans: Span[] = [];
    const fired: Record<string, { score: number; matches: number }> = {};
    const scores = new Map<Detector, number>();
    const matches = new Map<Detector, number>();
    const evidence: string[] = [];
    for (const f of withoutNested(found)) {
      spans.push({ start: f.start, end: f.end, label: f.label });
      if (f.evidence !== undefined && evidence.length < MAX_EVIDENCE) evidence.push(f.evidence);
      scores.set(f.detector, Math.max(scores.get(f.detector) ?? 0, f.weight));
      const first = f.whole === undefined || f.start === f.whole.start; // a long match counts once, not per piece
      if (first) matches.set(f.detector, (matches.get(f.detector) ?? 0) + 1);
    }
    let remaining = 1; // Π(1 - detector score)
    let strongest: Detector | undefined;
    let strongestScore = 0;
    for (const detector of this.#detectors) {
      const s = scores.get(detector);
      if (s === undefined) continue;
      fired[detector.id] = { score: s, matches: matches.get(detector) ?? 0 };
      remaining *= 1 - s;
      if (s > strongestScore) {
        strongest = detector;
        strongestScore = s;
      }
    }
    const score = round(1 - remaining, 4);
    const positive = strongest !== undefined && score >= this.#threshold;
    const label = positive ? (this.#positive ?? FAMILY_LABELS[strongest!.family].positive) : this.#negative;
    return {
      classifier: this.name,
      label,
      score,
      confidence: round(positive ? score : 1 - score, 4),
      spans: cutSpans(mergeSpans(spans, text.length), this.maxSpanChars),
      latency_ms: round(performance.now() - started, 3),
      detail: { threshold: this.#threshold, detectors: fired },
      ...(evidence.length > 0 ? { evidence } : {}),
      ...(open ? { pendingFrom } : {}),
    };
  }

  /** The result of a text where nothing was found. */
  #clean(started: number | undefined, open: boolean, pendingFrom: number): ClassifierResult {
    this.#cleanDetail ??= Object.freeze({ threshold: this.#threshold, detectors: Object.freeze({}) });
    const result: ClassifierResult = {
      classifier: this.name,
      label: this.#negative,
      score: 0,
      confidence: 1,
      spans: NO_SPANS,
      latency_ms: started === undefined ? 0 : round(performance.now() - started, 3),
      detail: this.#cleanDetail,
    };
    if (open) result.pendingFrom = pendingFrom;
    return result;
  }

  /**
   * The release point of an open text that holds none of its trigger (the `pendingFrom` of
   * `classifySync(text, { open: true, untriggered: true })`), without a result: a stream asks it
   * at most chunks.
   */
  releasePoint(text: string): number {
    return this.#pendingOnly(TextView.openView(text));
  }

  /** The least release point of the detectors (their groups asked once), without searching. */
  #pendingOnly(view: TextView): number {
    this.#releasePoints ??= this.#releasePointsOf();
    let least = view.text.length;
    for (let i = 0; i < this.#releasePoints.length; i++) {
      const at = (this.#releasePoints[i] as (view: TextView) => number)(view);
      if (at < least) least = at;
    }
    return least;
  }

  /** What #pendingOnly asks: each group once, each detector outside a group. */
  #releasePointsOf(): Array<(view: TextView) => number> {
    const out = this.#groups.map((g) => g.pending);
    for (let i = 0; i < this.#detectors.length; i++) {
      const d = this.#detectors[i] as Detector;
      if (this.#groupOf[i] === -1) out.push((view) => pendingOf(d, view));
    }
    return out;
  }
}

/** The spans of a result where nothing was found: one, read-only. */
const NO_SPANS: Span[] = Object.freeze([]) as unknown as Span[];

/** Decoded hidden text kept per result (the first ones, in text order): enough for an audit. */
const MAX_EVIDENCE = 4;

type Found = Finding & { detector: Detector };

/**
 * Findings without those lying inside a stronger finding of another detector: the digits of an
 * IBAN are not also a phone number, the value of `api_key=sk-...` is one OpenAI key. The pieces of
 * a long match (Finding.whole) are judged as the whole match, all together.
 */
function withoutNested(found: Found[]): Found[] {
  if (found.length < 2) return found;
  // Stable: the pieces of a match keep their order.
  found.sort((a, b) => {
    const x = a.whole ?? a;
    const y = b.whole ?? b;
    return x.start - y.start || y.end - x.end || b.weight - a.weight;
  });
  const kept: Found[] = [];
  let cover: Found | undefined; // the finding reaching furthest so far
  let coverEnd = 0;
  for (const f of found) {
    const end = (f.whole ?? f).end;
    const nested = cover !== undefined && end <= coverEnd && f.detector !== cover.detector && f.weight < cover.weight;
    if (!nested) kept.push(f);
    if (cover === undefined || end > coverEnd) {
      cover = f;
      coverEnd = end;
    }
  }
  return kept;
}

/** Sorted, disjoint spans with those longer than `max` cut into consecutive pieces of at most `max`. */
function cutSpans(spans: Span[], max: number): Span[] {
  if (spans.every((s) => s.end - s.start <= max)) return spans;
  const out: Span[] = [];
  for (const s of spans) {
    for (let start = s.start; start < s.end; start += max) {
      out.push({ start, end: Math.min(s.end, start + max), label: s.label });
    }
  }
  return out;
}

function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
