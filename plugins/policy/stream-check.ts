/**
 * Egress checks on a streamed answer (OpenAI-style SSE chunks), as it passes. The text of the
 * chunks goes into a sliding window; every `scanEveryChars` of new text (and at the end) the
 * window is checked, so a match that spans chunks is still seen and the cost does not grow with
 * the length of the answer.
 *
 * With a hold-back (the default: at least the longest span the egress classifiers can match),
 * text reaches the client only once a scan saw it with that much text after it, so a match is
 * blocked or masked before any of it is sent. Without one (`holdback_chars: 0`) chunks go out as
 * they come and only the chunk being checked can still be masked: a redact rule that matches text
 * already sent ends the stream like a block. Never a silent allow.
 *
 * A block ends the stream with a `content_filter` finish, an error event and `[DONE]`. The check
 * reads the stream through the runtime's wire view (parsed chunks, `[DONE]` apart: the stage adds
 * it with `answer.filterOpenAIChunks`): an event that is not a JSON object (the wire view's
 * `invalid_event`), or a stream that ends without `[DONE]`, cannot be checked: an
 * UninspectableAnswer, and the stage's `on_uninspectable` decides (refused: the same ending with a
 * backend error).
 */
import {
  OpenAIChunk,
  OpenAIStreamFilter,
  type OpenAIStreamReader,
  openaiWire,
  type PolicyDecision,
  type SseEvent,
  type SseFilter,
  type SseVerdict,
  UninspectableAnswer,
} from '../../runtime/index.ts';
import type { Span } from '../classify/api.ts';
import { DecisionOnLastEvent } from './stream-decision.ts';

const { chunkText, mapChunkText } = openaiWire;

export interface WindowVerdict {
  decision: PolicyDecision;
  /** Spans (offsets into the window text) a redact decision masks. */
  spans: Span[];
  /**
   * Of an open window (check with `open`): the offset in the window text from which a match
   * could still be completed by more text (the minimum over the classifiers, Detector.pendingFrom).
   * Everything before it may be released once this verdict is applied.
   */
  pendingFrom?: number;
}

/** How much of a stream was checked when a decision was taken. */
export interface StreamScan {
  chars: number;
  events: number;
  /** Whether the whole answer had been scanned (its end reached). */
  complete: boolean;
}

export function scanDetails(s: StreamScan): Record<string, unknown> {
  return { stream_scanned_chars: s.chars, stream_events: s.events, stream_complete: s.complete };
}

export interface StreamCheckOptions {
  windowChars: number;
  scanEveryChars: number;
  /**
   * The most streamed text withheld (0: forward at once, checked every scanEveryChars). Within it,
   * text is released as soon as no match can still grow into it (WindowVerdict.pendingFrom); past
   * it, the held text is checked as if the answer ended there (a match cut short counts) and the
   * oldest text is released.
   */
  holdbackChars: number;
  /**
   * Once text went out, check (and release) again only when this much new text came (0: at every
   * chunk): fewer checks, text released in larger steps.
   */
  releaseEveryChars?: number;
  /**
   * Context kept before the held text in an open check (at every chunk): what the detectors need
   * before a span (`password =` before its value). Default: `windowChars - scanEveryChars`, as in
   * every other check.
   */
  openContextChars?: number;
  /**
   * May answer at once (then an event that completes a scan step still costs no promise). `open`:
   * the answer goes on after this text (matches it cuts short are held, not judged).
   */
  check(windowText: string, open?: boolean, untriggered?: boolean): WindowVerdict | Promise<WindowVerdict>;
  /**
   * What every text the check finds anything in holds (ClassifierTrigger): with it, the stream
   * tests each chunk's new text (and `reach` characters before it) instead of its window, and a
   * window known to hold none is checked `untriggered` (only the release points are asked).
   */
  trigger?: { test(text: string): boolean; reach: number };
  /**
   * The release point of an open text that holds no trigger (`check(text, true, true).pendingFrom`),
   * when such a check decides nothing else (the rules allow a text where nothing was found, and
   * nothing is recorded of it); undefined: `check` is asked. Most checks of a stream are of such
   * texts: this answer makes no verdict.
   */
  releasePoint?(text: string): number | undefined;
  /** A rule blocked or redacted: record it (the audit stage writes it before the client sees more). */
  decided(decision: PolicyDecision, scanned: StreamScan): void;
  /** The answer is complete (`[DONE]`) and no rule blocked it; called once. */
  ended?(scanned: StreamScan): void;
  /** The body of the error event that ends a blocked or refused stream. */
  errorBody(reason: PolicyDecision | UninspectableAnswer): unknown;
  mask(text: string, spans: Span[]): string;
  /**
   * The decision of the whole stream, as its last event carries it (`filter_decision` on the
   * `content_filter` finish of a blocked stream; otherwise on the upstream's last text-less event
   * before `[DONE]`, its finish or usage chunk: stream-decision.ts). Absent: nothing is added.
   */
  summary?(): Record<string, unknown>;
}

/** The check of one streamed answer, as a reader of the runtime's OpenAI wire view (`answer.filterOpenAIChunks`). */
export function streamReader(o: StreamCheckOptions): OpenAIStreamReader {
  const check = o.holdbackChars > 0 ? new ReleaseCheck(o) : new WindowCheck(o);
  // An unblocked stream's decision rides on its last event (stream-decision.ts).
  return o.summary ? new DecisionOnLastEvent(check, () => o.summary?.()) : check;
}

/** The same as the stream filter the runtime makes of it (what `filterOpenAIChunks` adds): for tests and benches. */
export function streamCheck(o: StreamCheckOptions): SseFilter {
  return new OpenAIStreamFilter(streamReader(o));
}

/**
 * What both variants share: the window, counters, the parse of an event, and the redaction
 * bookkeeping in absolute offsets (characters since the start of the answer's text).
 */
abstract class StreamCheckBase implements OpenAIStreamReader {
  protected window = '';
  protected unscanned = 0;
  protected chars = 0;
  protected events = 0;
  /** The last chunk taken (its JSON read only when a block needs its id and model). */
  protected lastChunk: OpenAIChunk | undefined;
  protected completed = false;
  #redacted = false;
  /** Absolute ranges already masked (kept while they touch the window). */
  #masked: Span[] = [];

  constructor(protected readonly o: StreamCheckOptions) {}

  abstract onChunk(chunk: OpenAIChunk): Verdict | Promise<Verdict>;
  abstract onDone(done: SseEvent): SseVerdict | Promise<SseVerdict>;
  abstract onEnd(): Promise<SseEvent[]>;

  /** The stream's events after the block or refusal: a `content_filter` finish, the error, `[DONE]`. */
  refuse(err: UninspectableAnswer): SseEvent[] {
    return blockEvents(this.lastChunk?.json, this.o.errorBody(err), this.o.summary?.());
  }

  /** Adds a chunk's text to the window (which always keeps the text not scanned yet, whole). */
  protected take(chunk: OpenAIChunk, text: string, keepAtLeast: number): void {
    this.events++;
    this.chars += text.length;
    this.lastChunk = chunk;
    this.unscanned += text.length;
    // A chunk longer than the window is still scanned whole, with the usual context before it.
    const keep = Math.max(this.o.windowChars, keepAtLeast, this.unscanned + this.o.windowChars - this.o.scanEveryChars);
    this.window = (this.window + text).slice(-keep);
  }

  protected scanned(complete: boolean): StreamScan {
    return { chars: this.chars, events: this.events, complete };
  }

  /** The end of a blocked stream, after recording the block. */
  protected block(decision: PolicyDecision, complete: boolean): SseEvent[] {
    this.o.decided(decision, this.scanned(complete));
    return blockEvents(this.lastChunk?.json, this.o.errorBody(decision), this.o.summary?.());
  }

  /** Records the first redaction of the answer. */
  protected redacted(decision: PolicyDecision): void {
    if (this.#redacted) return;
    this.#redacted = true;
    this.o.decided(decision, this.scanned(false));
  }

  /** Says once that the answer is complete and allowed. */
  protected complete(): void {
    if (this.completed) return;
    this.completed = true;
    this.o.ended?.(this.scanned(true));
  }

  /** The verdict's spans in absolute offsets (`base`: where the checked text starts, by default the window). */
  protected absolute(spans: Span[], base = this.chars - this.window.length): Span[] {
    // Ranges that left the window can no longer matter. The window, not the checked text: an open
    // check reads less context than a settled one, which would find a span masked and forgotten
    // in between and take it for a leak (a false block).
    const windowStart = this.chars - this.window.length;
    this.#masked = this.#masked.filter((r) => r.end > windowStart);
    return spans.map((sp) => ({ ...sp, start: sp.start + base, end: sp.end + base }));
  }

  /**
   * Whether a span reaches into text already sent (before `sentEnd`) that was not masked: that
   * part is out of reach, so the redaction cannot be kept.
   */
  protected leaked(span: Span, sentEnd: number): boolean {
    if (span.start >= sentEnd) return false;
    let from = span.start;
    const upto = Math.min(span.end, sentEnd);
    for (const r of this.#masked) if (r.start <= from && r.end > from) from = r.end;
    return from < upto;
  }

  protected rememberMasked(span: Span): void {
    this.#masked.push(span);
  }

  /** The spans masked so far that still touch the window (absolute offsets). */
  protected maskedSpans(): Span[] {
    return this.#masked;
  }

  /** A block decision for a redaction that came too late (its text was sent). */
  protected tooLate(decision: PolicyDecision): PolicyDecision {
    return {
      ...decision,
      action: 'block',
      detail: `${decision.detail ?? 'redaction'}: the matched text was already sent`,
      details: { ...decision.details, redact_after_send: true },
    };
  }
}

/**
 * No hold-back: chunks go out as they come. Most events cost a JSON parse and a string append,
 * a scan step a classification; no promise unless the check waits (a model).
 */
class WindowCheck extends StreamCheckBase {
  onChunk(c: OpenAIChunk): Verdict | Promise<Verdict> {
    const text = c.text;
    if (!text) return undefined;
    const event = c.event;
    this.take(c, text, 0);
    if (this.unscanned < this.o.scanEveryChars) return undefined;
    const outcome = this.#scan(text, false);
    if (outcome instanceof Promise) return outcome.then((o) => this.#verdict(event, o));
    return this.#verdict(event, outcome);
  }

  async onEnd(): Promise<SseEvent[]> {
    if (this.completed) return [];
    const outcome = this.unscanned === 0 ? undefined : await this.#scan('', true);
    if (outcome?.end) return outcome.end;
    throw new UninspectableAnswer('truncated', 'the stream ended without [DONE]');
  }

  /** The text after the last scan is checked before `[DONE]`: a block there must reach the client. */
  onDone(done: SseEvent): SseVerdict | Promise<SseVerdict> {
    const outcome = this.unscanned === 0 ? undefined : this.#scan('', true);
    const verdict = (o: Outcome): SseVerdict => {
      if (o?.end) return { events: o.end, end: true };
      this.complete();
      return { events: [done] };
    };
    return outcome instanceof Promise ? outcome.then(verdict) : verdict(outcome);
  }

  #verdict(event: SseEvent, outcome: Outcome): Verdict {
    if (outcome?.end) return { events: outcome.end, end: true };
    if (outcome?.masked !== undefined) return { events: [{ ...event, data: JSON.stringify(outcome.masked) }] };
    return undefined;
  }

  /** Checks the window; `current` is the text of the chunk being decided ('' at the end). */
  #scan(current: string, atEnd: boolean): Outcome | Promise<Outcome> {
    this.unscanned = 0;
    const verdict = this.o.check(this.window);
    if (verdict instanceof Promise) return verdict.then((v) => this.#act(v, current, atEnd));
    return this.#act(verdict, current, atEnd);
  }

  #act(verdict: WindowVerdict, current: string, atEnd: boolean): Outcome {
    const decision = verdict.decision;
    if (decision.action === 'block') return { end: this.block(decision, atEnd) };
    if (decision.action !== 'redact' || verdict.spans.length === 0) return undefined;
    // Only the current chunk is still ours to change.
    const sentEnd = this.chars - current.length;
    const spans = this.absolute(verdict.spans);
    if (spans.some((sp) => this.leaked(sp, sentEnd))) return { end: this.block(this.tooLate(decision), atEnd) };
    const masked = maskChunk((this.lastChunk as OpenAIChunk).json, sentEnd, spans, this.o.mask);
    if (masked === undefined) return undefined;
    for (const sp of spans) if (sp.end > sentEnd) this.rememberMasked(sp);
    this.redacted(decision);
    return { masked };
  }
}

type Outcome = { end?: SseEvent[]; masked?: Record<string, unknown> } | undefined;

/** What a check does with an event; undefined passes it as it came. */
type Verdict = SseVerdict | undefined;

/** An event waiting to be released: its chunk as the backend sent it, and the text it adds. */
interface Held {
  event: SseEvent;
  chunk?: Readonly<Record<string, unknown>>;
  /** Instead of `chunk`, until it is needed: the wire view's chunk, whose JSON is read when first asked (jsonOf). */
  source?: OpenAIChunk;
  text: string;
  /** Of a chunk whose start went out (cut without building objects): the chunk it was, its text, and where it was cut. */
  rest?: { chunk: Readonly<Record<string, unknown>> | OpenAIChunk; text: string; at: number };
  /** It ended in held text at a release already: the next one that does not take it whole cuts it. */
  waited?: boolean;
}

/**
 * A Held with every field from the start: one shape (setting `waited` or `rest` later would make
 * a new one, which V8's optimised code checks for and drops at the next full collection when no
 * held event has it: the stream's hot code compiled again after every one).
 */
function held(
  event: SseEvent,
  chunk: Readonly<Record<string, unknown>> | undefined,
  source: OpenAIChunk | undefined,
  text: string,
): Held {
  return { event, chunk, source, text, rest: undefined, waited: false };
}

/**
 * New characters between two full checks of a stream while a trigger is in reach (issue 26): on
 * text full of numbers and addresses nearly every chunk's window holds one, and a full check at
 * every chunk cost ~3.5x the pre-issue filter. At most this much more text waits there.
 */
const TRIGGERED_STEP = 32;

/** The verdict of an event that is held (nothing goes out now): one, read-only, for every such event. */
const HOLD: SseVerdict = Object.freeze({ events: Object.freeze([]) as unknown as SseEvent[] });

type Step<T> = T | Promise<T>;
const then = <T, U>(x: Step<T>, f: (value: T) => U): Step<U> => (x instanceof Promise ? x.then(f) : f(x));

/**
 * The variant with a hold-back: each event with text is checked with the held text before it
 * (an open window: matches it cuts short wait), and the held text is released at once up to
 * where a match could still grow into it (WindowVerdict.pendingFrom): ordinary text goes out with
 * its chunk, the current token or the start of what may become a key waits for what follows. A
 * chunk of plain content is cut there; any other waits whole. Past `holdbackChars` held, the
 * window is checked as if the answer ended there (a match cut short counts, as before) and the
 * oldest text goes out: the hold-back is a bound, not an amount always held. While a trigger is
 * in reach the full check runs once per TRIGGERED_STEP new characters, not per event. A block drops
 * everything held; a redact masks the matched spans as their text is released.
 *
 * A tool call's deltas are held apart, not in the window, until its choice finishes (or `[DONE]`):
 * then its arguments are checked whole, so a client never starts a call the policy would block,
 * and the text around it does not wait for it.
 */
class ReleaseCheck extends StreamCheckBase {
  #held: Held[] = [];
  #heldChars = 0;
  /** Absolute offset of the first held character: everything before it went out. */
  #released = 0;
  /** Where the last check says text may go out up to (absolute). */
  #until = 0;
  #tools: Held[] = [];
  #toolText = '';
  /** Text kept before the held text for the detectors' context (`password =` before its value). */
  readonly #context: number;
  readonly #openContext: number;
  /** Absolute [from, to): a stretch of the answer's text known to hold no trigger (o.trigger). */
  #quietFrom = 0;
  #quietTo = 0;
  /** The last check of an open window found a trigger in it (a full check was made). */
  #triggered = false;
  readonly #triggeredStep: number;

  constructor(o: StreamCheckOptions) {
    super(o);
    this.#context = Math.max(0, o.windowChars - o.scanEveryChars);
    this.#openContext = Math.min(this.#context, o.openContextChars ?? this.#context);
    this.#triggeredStep = Math.min(o.scanEveryChars, TRIGGERED_STEP);
  }

  onChunk(c: OpenAIChunk): Verdict | Promise<Verdict> {
    const event = c.event;
    // The common chunk (content only) is known without its JSON.
    const kind = c.contentOnly ? PLAIN : kindOf(c.json);
    if (kind === TOOL) {
      const text = c.text;
      this.events++;
      this.lastChunk = c;
      this.#tools.push(held(event, c.json, undefined, text));
      this.#toolText += text;
      return finishes(c.json) ? this.#settle([], false) : HOLD;
    }
    const text = c.text;
    if (kind === FINISH) {
      if (text !== '') this.#take(c, text, event);
      return this.#settle(text === '' ? [event] : [], false);
    }
    if (text === '') {
      if (this.#held.length === 0) return undefined;
      this.#held.push(held(event, undefined, c, '')); // keeps its place behind the held text
      return HOLD;
    }
    // Nothing held, or a held word that the chunk goes on with.
    const continues = this.#heldChars === 0 || !isBlank(this.window.charCodeAt(this.window.length - 1));
    this.#take(c, text, event);
    const open = this.#heldChars <= this.o.holdbackChars;
    // A chunk without a blank that starts or goes on with the last word is checked with what ends
    // that word: the word is what an address, a key or a number would start with, held anyway, and
    // skipping the check only waits (nothing is released without one). Up to scanEveryChars held.
    // Not while a chunk waits to be cut (its text before the release point goes out at the next check).
    if (open && continues && this.#heldChars <= this.o.scanEveryChars && !hasBlank(text) && !this.#held[0]?.waited)
      return HOLD;
    // The operator's step (release_every_chars), once the first text went out.
    if (open && this.#released > 0 && this.unscanned < (this.o.releaseEveryChars ?? 0)) return HOLD;
    // While a trigger is within reach (text full of numbers, addresses, `key = value`), the last
    // check was a full one and the next would almost surely be one too: once text went out, a full
    // check at most once per TRIGGERED_STEP of new text, the text after the last check's release
    // point held meanwhile (holding is safe; only a check releases). Prose is not affected.
    if (open && this.#triggered && this.#released > 0 && this.unscanned < this.#triggeredStep) return HOLD;
    // A long held run (a key, a base64 blob) is checked again every so often, not at every chunk:
    // past the bound every scanEveryChars (as the fixed hold-back did), below it once the run grew
    // by a quarter, so its cost stays linear in its length.
    const every = open ? Math.min(this.o.scanEveryChars, this.#heldChars >> 2) : this.o.scanEveryChars;
    if (this.#heldChars > this.o.scanEveryChars && this.unscanned < every) return HOLD;
    const blocked = this.#scan(open, false);
    if (blocked === undefined)
      return this.#released === this.chars - text.length && this.#passes(event)
        ? undefined
        : { events: this.#release(this.#until) };
    return then(blocked, (b) => (b ? { events: b, end: true } : { events: this.#release(this.#until) }));
  }

  /**
   * Whether the event just held is, whole, all the release lets out (the common case of prose:
   * nothing was held before it and the release point is past it): then it passes as it came,
   * with no verdict made.
   */
  #passes(event: SseEvent): boolean {
    if (this.#until < this.chars || this.#held.length !== 1 || this.maskedSpans().length > 0) return false;
    const h = this.#held[0] as Held;
    if (h.event !== event) return false;
    this.#held.length = 0;
    this.#heldChars = 0;
    this.#released = this.chars;
    return true;
  }

  onDone(done: SseEvent): Step<SseVerdict> {
    return this.#finish(done);
  }

  async onEnd(): Promise<SseEvent[]> {
    if (this.completed) return [];
    const blocked = this.unscanned > 0 || this.#heldChars > 0 ? await this.#scan(false, true) : undefined;
    if (blocked) return blocked;
    const tools = this.#toolText !== '' ? await this.#checkTools(true) : undefined;
    if (tools) return tools;
    throw new UninspectableAnswer('truncated', 'the stream ended without [DONE]');
  }

  #take(c: OpenAIChunk, text: string, event: SseEvent): void {
    this.events++;
    this.chars += text.length;
    this.lastChunk = c;
    this.unscanned += text.length;
    this.#held.push(held(event, undefined, c, text));
    this.#heldChars += text.length;
    const keep = this.#heldChars + this.#context;
    this.window += text;
    if (this.window.length > keep) this.window = this.window.slice(this.window.length - keep);
  }

  /** `[DONE]`: everything held is checked as the end of the answer and released, then `[DONE]`. */
  #finish(done: SseEvent): Step<SseVerdict> {
    return then(this.#settle([done], true), (verdict) => {
      if (!verdict.end) this.complete();
      return verdict;
    });
  }

  /**
   * A choice finished (or the answer did): the held text is checked as complete, the held tool
   * calls are checked whole, and all of it goes out (the text, the tool calls, then `tail`).
   */
  #settle(tail: SseEvent[], atEnd: boolean): Step<SseVerdict> {
    const content = this.unscanned > 0 || this.#heldChars > 0 ? this.#scan(false, atEnd) : undefined;
    // A promise of a promise is one promise.
    return then(content, (blocked): Step<SseVerdict> => {
      if (blocked) return { events: blocked, end: true };
      const tools = this.#toolText !== '' ? this.#checkTools(atEnd) : undefined;
      return then(tools, (refused): SseVerdict => {
        if (refused) return { events: refused, end: true };
        const events = this.#release(this.chars);
        for (const h of this.#tools) events.push(h.event);
        this.#tools = [];
        this.#toolText = '';
        for (const e of tail) events.push(e);
        return { events };
      });
    }) as Step<SseVerdict>;
  }

  /** The held tool calls' text, checked whole: a block ends the stream, a redact masks them. */
  #checkTools(atEnd: boolean): Step<SseEvent[] | undefined> {
    return then(this.o.check(this.#toolText, false), (verdict) => {
      const decision = verdict.decision;
      if (decision.action === 'block') return this.#drop(this.block(decision, atEnd));
      if (decision.action !== 'redact' || verdict.spans.length === 0) return undefined;
      let start = 0;
      let masked = false;
      for (const h of this.#tools) {
        if (h.text !== '' && h.chunk) {
          const chunk = maskChunk(h.chunk, start, verdict.spans, this.o.mask);
          if (chunk !== undefined) {
            h.event = { ...h.event, data: JSON.stringify(chunk) };
            masked = true;
          }
        }
        start += h.text.length;
      }
      if (masked) this.redacted(decision);
      return undefined;
    });
  }

  /** Checks the window (open: the answer goes on); on a block, the events that end the stream. */
  #scan(open: boolean, atEnd: boolean): Step<SseEvent[] | undefined> {
    this.unscanned = 0;
    const keep = this.#heldChars + this.#openContext;
    let from = open && this.window.length > keep ? this.window.length - keep : 0;
    // Never from inside a word the window holds the start of: a detector reads the checked text's
    // start as a token's start (`-eyJ…` holds no JWT, the `eyJ…` cut from it does), and text the
    // whole answer's check lets out would be blocked here once it went out.
    while (from > 0 && !isBlank(this.window.charCodeAt(from - 1))) from--;
    const text = from > 0 ? this.window.slice(from) : this.window;
    const untriggered = this.#untriggered(text);
    this.#triggered = this.o.trigger !== undefined && !untriggered;
    // Most checks of a stream of prose: only the release point to ask, no verdict made.
    if (untriggered && open && this.o.releasePoint !== undefined) {
      const at = this.o.releasePoint(text);
      if (at !== undefined) {
        this.#releaseUpTo(this.chars - text.length + at, open);
        return undefined;
      }
    }
    return then(this.o.check(text, open, untriggered), (verdict) =>
      this.#act(verdict, open, atEnd, this.chars - text.length),
    );
  }

  /**
   * Whether the window `text` (it ends at the answer's end) holds no trigger, testing only what
   * is not known: when the last quiet stretch covers its start, the text from `reach` characters
   * before that stretch's end (an occurrence ending after it starts there at the earliest; a run
   * of more would have been one inside the stretch). The window becomes the stretch, or none.
   */
  #untriggered(text: string): boolean {
    const trigger = this.o.trigger;
    if (trigger === undefined) return false;
    const start = this.chars - text.length;
    const known = this.#quietFrom <= start && this.#quietTo >= start;
    const from = known ? Math.max(start, this.#quietTo - trigger.reach) : start;
    const quiet = !trigger.test(from === start ? text : text.slice(from - start));
    this.#quietFrom = quiet ? start : this.chars;
    this.#quietTo = this.chars;
    return quiet;
  }

  /** `base`: the absolute offset of the checked text's first character. */
  #act(verdict: WindowVerdict, open: boolean, atEnd: boolean, base: number): SseEvent[] | undefined {
    const decision = verdict.decision;
    if (decision.action === 'block') return this.#drop(this.block(decision, atEnd));
    if (decision.action === 'redact' && verdict.spans.length > 0) {
      const spans = this.absolute(verdict.spans, base);
      if (spans.some((sp) => this.leaked(sp, this.#released))) {
        return this.#drop(this.block(this.tooLate(decision), atEnd));
      }
      const known = this.maskedSpans();
      let added = false;
      for (const sp of spans) {
        if (sp.end <= this.#released || known.some((m) => m.start === sp.start && m.end === sp.end)) continue;
        this.rememberMasked(sp);
        added = true;
      }
      if (added) this.redacted(decision);
    }
    this.#releaseUpTo(
      verdict.pendingFrom === undefined ? this.chars - this.o.holdbackChars : base + verdict.pendingFrom,
      open,
    );
    return undefined;
  }

  /** Sets where text may go out up to (absolute), from a release point (`open`) or at a settled check. */
  #releaseUpTo(at: number, open: boolean): void {
    let until = open ? at : Math.max(at, this.chars - this.o.holdbackChars);
    // Not inside a span still to mask: it goes out whole, as one placeholder.
    for (const m of this.maskedSpans())
      if (m.start >= this.#released && m.start < until && m.end > until) until = m.start;
    this.#until = until;
  }

  /** A block: nothing held goes out. */
  #drop(end: SseEvent[]): SseEvent[] {
    this.#held = [];
    this.#heldChars = 0;
    this.#tools = [];
    this.#toolText = '';
    return end;
  }

  /**
   * Releases the held events up to absolute offset `until`, masked: whole events, and the part
   * before `until` of a chunk of plain content (cut there; never inside a surrogate pair).
   */
  #release(until: number): SseEvent[] {
    const out: SseEvent[] = [];
    const masks = this.maskedSpans();
    while (this.#held.length > 0) {
      const h = this.#held[0];
      if (h.text === '') {
        out.push(this.#held.shift()!.event);
        continue;
      }
      const end = this.#released + h.text.length;
      if (end <= until) {
        this.#held.shift();
        this.#heldChars -= h.text.length;
        out.push(masked(h, this.#released, masks, this.o.mask));
        this.#released = end;
        continue;
      }
      let cut = until - this.#released;
      const c = h.text.charCodeAt(cut - 1);
      if (cut > 0 && c >= 0xd800 && c <= 0xdbff) cut--;
      if (cut <= 0) break;
      // A chunk ending in a word that may go on waits whole for one more release: the next
      // chunk usually ends the word and both go out as they came (a cut makes two new events).
      // Cut only if it would wait again (the start of an address: the text before it goes out).
      if (!h.waited) {
        h.waited = true;
        break;
      }
      const start = this.#released;
      const touched = masks.some((m) => m.end > start && m.start < start + h.text.length);
      // The common cut (plain content, nothing to mask): two strings, no objects.
      const data = touched ? undefined : splitData(h, cut);
      if (data) {
        out.push(withData(h.event, data[0]));
        const source = h.chunk ?? h.source ?? (h.rest as NonNullable<Held['rest']>).chunk;
        const at = h.chunk || h.source ? cut : (h.rest as NonNullable<Held['rest']>).at + cut;
        h.rest = { chunk: source, text: h.rest?.text ?? h.text, at };
        h.chunk = undefined;
        h.source = undefined;
        h.event = withData(h.event, data[1]);
        h.text = h.text.slice(cut);
        this.#heldChars -= cut;
        this.#released += cut;
        break;
      }
      materialise(h);
      const parts = h.chunk ? splitChunk(h.chunk, h.text, cut) : undefined;
      if (parts) {
        out.push(
          masked(
            { event: { ...h.event, data: JSON.stringify(parts[0]) }, chunk: parts[0], text: h.text.slice(0, cut) },
            this.#released,
            masks,
            this.o.mask,
          ),
        );
        h.chunk = parts[1];
        h.text = h.text.slice(cut);
        h.event = { ...h.event, data: JSON.stringify(parts[1]) };
        this.#heldChars -= cut;
        this.#released += cut;
      }
      break;
    }
    return out;
  }
}

/** The event of a held chunk starting at absolute `start`, with the spans that touch it masked. */
function masked(h: Held, start: number, spans: Span[], mask: (text: string, spans: Span[]) => string): SseEvent {
  if (spans.length === 0) return h.event;
  // No span touches its text: as it came (its JSON not read).
  const end = start + h.text.length;
  let touched = false;
  for (const sp of spans) if (sp.end > start && sp.start < end) touched = true;
  if (!touched) return h.event;
  materialise(h);
  if (!h.chunk) return h.event;
  const chunk = maskChunk(h.chunk, start, spans, mask);
  return chunk === undefined ? h.event : { ...h.event, data: JSON.stringify(chunk) };
}

/** `e` with other data. */
function withData(e: SseEvent, data: string): SseEvent {
  return e.event === undefined && e.id === undefined ? { data } : { ...e, data };
}

/** A blank or line break: what ends a word. */
const isBlank = (c: number) => c === 32 || c === 10 || c === 9 || c === 13 || c === 0xa0 || c === 0x3000;
function hasBlank(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (isBlank(text.charCodeAt(i))) return true;
  return false;
}

/** The chunk's JSON in `chunk` (read from the wire view's chunk, `source`, if not yet). */
function parsed(h: Held): void {
  if (h.source === undefined) return;
  h.chunk = h.source.json;
  h.source = undefined;
}

/** Builds the chunk object of a chunk's rest (Held.rest), when it must be masked or cut the slow way. */
function materialise(h: Held): void {
  parsed(h);
  if (h.chunk || !h.rest) return;
  const whole = h.rest.chunk;
  h.chunk = splitChunk(whole instanceof OpenAIChunk ? whole.json : whole, h.rest.text, h.rest.at)?.[1];
  h.rest = undefined;
}

/**
 * The events of a held chunk of plain content cut after `cut` characters of its text, as two
 * strings made from its own (`"content":"…"` replaced): undefined when the chunk is not plain
 * content (a role, log probabilities, a finish) or its JSON writes the text in another way.
 */
function splitData(h: Held, cut: number): [string, string] | undefined {
  const from = h.source ?? h.rest?.chunk;
  // A content-only chunk (or the rest of one) is plain content: known without its JSON.
  if (!(from instanceof OpenAIChunk && from.contentOnly)) {
    parsed(h);
    const rest = h.rest?.chunk;
    const chunk = h.chunk ?? (rest instanceof OpenAIChunk ? rest.json : rest);
    const choices = chunk?.choices;
    if (!Array.isArray(choices) || choices.length !== 1 || chunk?.error !== undefined) return undefined;
    const choice = choices[0] as Record<string, unknown> | null;
    const delta = choice?.delta as Record<string, unknown> | undefined;
    if (!delta || choice?.logprobs != null || choice?.finish_reason != null || choice?.message !== undefined)
      return undefined;
    if (choice?.text !== undefined || (h.chunk && (delta.role !== undefined || delta.content !== h.text)))
      return undefined;
    if (h.chunk && chunkText(h.chunk) !== h.text) return undefined;
  }
  const data = h.event.data;
  const needle = `"content":${JSON.stringify(h.text)}`;
  const at = data.indexOf(needle);
  if (at === -1 || data.indexOf(needle, at + 1) !== -1) return undefined;
  const before = data.slice(0, at);
  const after = data.slice(at + needle.length);
  return [
    `${before}"content":${JSON.stringify(h.text.slice(0, cut))}${after}`,
    `${before}"content":${JSON.stringify(h.text.slice(cut))}${after}`,
  ];
}

const PLAIN = 0;
const TOOL = 1;
const FINISH = 2;
/**
 * What a chunk is to the check, in one look at its choices: TOOL when it carries (part of) a tool
 * call (a delta with `tool_calls` or `function_call`), else FINISH when it ends a choice (a
 * `finish_reason`), else PLAIN.
 */
function kindOf(chunk: Record<string, unknown>): number {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return PLAIN;
  let kind = PLAIN;
  for (let i = 0; i < choices.length; i++) {
    const c = choices[i] as Record<string, unknown> | null;
    if (c === null || typeof c !== 'object') continue;
    const d = c.delta as Record<string, unknown> | undefined;
    if (d && (d.tool_calls != null || d.function_call != null)) return TOOL;
    if (c.finish_reason != null) kind = FINISH;
  }
  return kind;
}

/** Whether a chunk ends a choice (a `finish_reason`). */
function finishes(chunk: Record<string, unknown>): boolean {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return false;
  for (const c of choices) if ((c as Record<string, unknown> | null)?.finish_reason != null) return true;
  return false;
}

/**
 * A chunk of plain content (one choice, its text only in `delta.content` or, for completions,
 * `text`) cut into the chunks of its first `cut` characters and of the rest: the first keeps the
 * role, the second the finish. Undefined for any other chunk (it waits whole).
 */
function splitChunk(
  chunk: Record<string, unknown>,
  text: string,
  cut: number,
): [Record<string, unknown>, Record<string, unknown>] | undefined {
  const choices = chunk.choices;
  if (!Array.isArray(choices) || choices.length !== 1 || chunk.error !== undefined) return undefined;
  const choice = choices[0] as Record<string, unknown>;
  if (typeof choice !== 'object' || choice === null) return undefined;
  const piece = (part: Record<string, unknown>, finish: unknown) => {
    const c: Record<string, unknown> = { ...choice, ...part, finish_reason: finish };
    if (c.logprobs != null) c.logprobs = null; // they spell the whole chunk's text
    return { ...chunk, choices: [c] };
  };
  const delta = choice.delta as Record<string, unknown> | undefined;
  if (choice.message === undefined && typeof choice.text === 'string' && choice.text === text && delta === undefined) {
    return [piece({ text: text.slice(0, cut) }, null), piece({ text: text.slice(cut) }, choice.finish_reason ?? null)];
  }
  if (choice.text !== undefined || choice.message !== undefined || typeof delta !== 'object' || delta === null)
    return undefined;
  if (delta.content !== text || chunkText(chunk) !== text) return undefined;
  const { role: _role, ...rest } = delta;
  return [
    piece({ delta: { ...delta, content: text.slice(0, cut) } }, null),
    piece({ delta: { ...rest, content: text.slice(cut) } }, choice.finish_reason ?? null),
  ];
}

/**
 * Masks the piece of text that starts at absolute offset `start`, for the spans (absolute) that
 * touch it: a span gets its placeholder in the piece where it starts; its continuation in later
 * pieces is dropped, so a span split across chunks reads as one placeholder. Undefined when no
 * span touches the piece.
 */
function maskPiece(
  text: string,
  start: number,
  spans: Span[],
  mask: (text: string, spans: Span[]) => string,
): string | undefined {
  const end = start + text.length;
  const touching = spans.filter((sp) => sp.end > start && sp.start < end);
  if (touching.length === 0) return undefined;
  const local = (sp: Span) => ({
    ...sp,
    start: Math.max(0, sp.start - start),
    end: Math.min(text.length, sp.end - start),
  });
  const heads = touching.filter((sp) => sp.start >= start).map(local);
  // Continuations all start at this piece's first character: drop up to the furthest end.
  const cut = Math.max(0, ...touching.filter((sp) => sp.start < start).map((sp) => local(sp).end));
  const shifted = heads
    .filter((sp) => sp.end > cut)
    .map((sp) => ({ ...sp, start: Math.max(0, sp.start - cut), end: sp.end - cut }));
  return mask(text.slice(cut), shifted);
}

/**
 * The chunk with the spans (absolute offsets) masked, field by field: each text field of the chunk
 * is a piece of the answer's text at its own offset (openaiWire.mapChunkText), masked by
 * maskPiece. Undefined when no span touches the chunk.
 */
function maskChunk(
  chunk: Record<string, unknown>,
  start: number,
  spans: Span[],
  mask: (text: string, spans: Span[]) => string,
): Record<string, unknown> | undefined {
  let touched = false;
  const out = mapChunkText(chunk, (field, offset) => {
    const masked = maskPiece(field, start + offset, spans, mask);
    if (masked === undefined) return field;
    touched = true;
    return masked;
  });
  return touched ? out : undefined;
}

/** The end of a blocked stream: a `content_filter` finish, the error, and `[DONE]`. */
function blockEvents(
  last: Record<string, unknown> | undefined,
  error: unknown,
  summary?: Record<string, unknown>,
): SseEvent[] {
  const completions = last?.object === 'text_completion';
  const finish = {
    ...(last?.id !== undefined ? { id: last.id } : {}),
    object: last?.object ?? 'chat.completion.chunk',
    created: last?.created ?? Math.floor(Date.now() / 1000),
    ...(last?.model !== undefined ? { model: last.model } : {}),
    choices: [
      completions
        ? { index: 0, text: '', logprobs: null, finish_reason: 'content_filter' }
        : { index: 0, delta: {}, logprobs: null, finish_reason: 'content_filter' },
    ],
    ...(summary ? { filter_decision: summary } : {}),
  };
  return [{ data: JSON.stringify(finish) }, { data: JSON.stringify(error) }, { data: '[DONE]' }];
}
