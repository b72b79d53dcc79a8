/**
 * Public contract of the `classify` plugin: the classifier-set resource, its classifiers and their
 * results. Other plugins (policy, redaction, admin endpoints, the ML classifiers) import this file
 * only, never the plugin's internals.
 */

/** A stretch of the text a classifier flagged: UTF-16 offsets, `end` exclusive. */
export interface Span {
  start: number;
  end: number;
  /** Placeholder type, e.g. EMAIL, PHONE, CREDIT_CARD, IBAN, NATIONAL_ID, API_KEY, PRIVATE_KEY, TOKEN. */
  label: string;
}

export interface ClassifierResult {
  classifier: string;
  label: string;
  /** How strongly the text shows what the classifier looks for, in [0, 1]. */
  score: number;
  /** How sure the classifier is of `label`, in [0, 1]. */
  confidence: number;
  spans: Span[];
  /** 0 for an `untriggered` check (nothing searched; a stream asks one at most chunks). */
  latency_ms: number;
  detail?: Record<string, unknown>;
  /**
   * Text the classified input hid from a human reader, decoded by a detector (the ASCII Unicode
   * tag characters spell, the bytes a run of variation selectors carries): a few short strings,
   * so that an audit record shows what was hidden. Absent when nothing was decoded. The only part
   * of the input a result may carry (spans are offsets, `detail` never holds text).
   */
  evidence?: string[];
  /**
   * Only when classified as an open text (ClassifyOptions.open): the earliest offset from which a
   * match could still be completed by more text (the text's length when none), the minimum of its
   * detectors' Detector.pendingFrom. Findings from there on are not counted yet. Absent from
   * classifiers without detectors (a model: a stream holds its maxSpanChars).
   */
  pendingFrom?: number;
}

/** How a text is classified. */
export interface ClassifyOptions {
  /**
   * The text may go on (a stream's window before its end): each detector's findings that more
   * text could still change are left out, and the result says from where (pendingFrom).
   */
  open?: boolean;
  /**
   * The caller found none of the classifiers' triggers in the text (Classifier.trigger): nothing
   * is searched, only the release points asked (with `open`). Wrong, it would miss findings: only
   * for a text the trigger's test said false of.
   */
  untriggered?: boolean;
}

/**
 * What every text on which a classifier finds anything holds (Tier A patterns whose detectors all
 * declare one): `test` false means no finding, open or not. An occurrence of what it looks for
 * spans at most `reach + 1` characters, so a text known to have none, extended, needs testing
 * only from `reach` characters before the extension (a stream tests each chunk, not its window).
 */
export interface ClassifierTrigger {
  test(text: string): boolean;
  reach: number;
}

export interface ClassifierInfo {
  name: string;
  tier: 'A' | 'B';
  type: 'pattern' | 'ml';
  status: 'loaded' | 'loading' | 'error';
  /** Model identifier, for `ml` classifiers only. */
  model?: string;
  error?: string;
}

export interface Classifier {
  readonly name: string;
  /**
   * The longest span a result can hold, in UTF-16 code units of the classified text (0 for a
   * classifier that reports no spans). A stream that holds back this much text sees each match
   * whole before any of it is sent (docs/classifiers.md, "Longest spans").
   */
  readonly maxSpanChars: number;
  /**
   * How much of a match the classifier must see before its result counts it, in UTF-16 code units
   * (0 for a classifier without detectors, such as an ML model, which judges the window it gets): a
   * text cut anywhere from that many characters into a match (of at most maxSpanChars) scores at
   * least the match's own weight. A stream whose rules only block holds back this much; one that
   * redacts needs maxSpanChars (docs/classifiers.md, "Longest spans").
   */
  readonly detectChars: number;
  info(): ClassifierInfo;
  /** Loads (compiles, or reads the model); idempotent. */
  load(): Promise<void>;
  classify(text: string): Promise<ClassifierResult>;
  /**
   * The same answer without waiting, for classifiers that never wait (Tier A patterns, always
   * loaded): the set then runs them without a promise each.
   */
  classifySync?(text: string, options?: ClassifyOptions): ClassifierResult;
  /** Absent: the classifier may find something in any text. */
  readonly trigger?: ClassifierTrigger;
  /**
   * The release point of an open text its trigger says false of: the `pendingFrom` of
   * `classifySync(text, { open: true, untriggered: true })`, without making a result (a stream
   * asks it at most chunks). Absent: classifySync is asked.
   */
  releasePoint?(text: string): number;
  /**
   * How to build the same classifier in a worker thread, for one that answers at once
   * (classifySync) with work that grows with the text: the set classifies a text longer than
   * 16 KiB there (set-worker.ts), so that it does not hold the event loop. Absent: a long text is
   * classified where the classifier is.
   */
  readonly offLoop?: OffLoopSpec;
  close?(): Promise<void>;
}

/**
 * A classifier as a worker thread rebuilds it: `module` (a file URL, `import.meta.url`) exports
 * `createOffLoop(spec)`, which returns it; `spec` is cloned into the worker (plain data).
 */
export interface OffLoopSpec {
  module: string;
  spec: unknown;
}

export interface ClassifierSet {
  list(): ClassifierInfo[];
  get(name: string): Classifier | undefined;
  /** Runs the named classifiers (all when undefined) on the text (`options`: for those with detectors). */
  classify(
    names: string[] | undefined,
    text: string,
    options?: ClassifyOptions,
  ): Promise<Record<string, ClassifierResult>>;
  /**
   * The same without waiting, when every named classifier can answer at once (classifySync);
   * undefined otherwise (then use classify). For checks run many times per request, such as the
   * egress check of a stream every few hundred characters. Also undefined for a text over the
   * set's long-text bound (16 KiB) that a classifier would classify off the event loop
   * (Classifier.offLoop): classify() sends it to the worker.
   */
  classifySync(
    names: string[] | undefined,
    text: string,
    options?: ClassifyOptions,
  ): Record<string, ClassifierResult> | undefined;
  /** Loads every classifier (ML models included); `models_loaded` counts the `ml` ones loaded. */
  warmup(): Promise<{ models_loaded: number; duration_ms: number }>;
  /** True when every classifier is loaded. */
  ready(): boolean;
  /**
   * The longest span the named classifiers (all when undefined) can report, in UTF-16 code units
   * of the classified text: the least a stream should hold back so that a match of theirs is seen
   * whole before any of it is sent. 0 when none reports spans. Throws on a name the set lacks.
   */
  maxSpanChars(names?: string[]): number;
  /**
   * The most the named classifiers (all when undefined) must see of a match before their results
   * count it (Classifier.detectChars): the least a stream should hold back when its rules only
   * block, so that a scan fires before any of the match is sent. 0 when none has detectors (ML
   * models judge the window they get). At most maxSpanChars(names). Throws on a name the set lacks.
   */
  detectChars(names?: string[]): number;
  /**
   * The least release point (Classifier.releasePoint) of the named classifiers (all when
   * undefined) for an open text none of their triggers holds; undefined when one has none.
   */
  releasePoint(names: string[] | undefined, text: string): number | undefined;
  /**
   * One trigger for the named classifiers (all when undefined), true when any of theirs is;
   * undefined when one has none (a model). Throws on a name the set lacks.
   */
  trigger(names?: string[]): ClassifierTrigger | undefined;
}

declare module '../../runtime/state.ts' {
  interface GatewayState {
    /** Results of the last `classify` stage, keyed by classifier name. */
    classifications?: Record<string, ClassifierResult>;
  }
}

export { mergeSpans, redact } from './redact.ts';
