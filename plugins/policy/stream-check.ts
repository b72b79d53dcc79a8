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
 * A block ends the stream with a `content_filter` finish, an error event and `[DONE]`. An event
 * that is not JSON, or a stream that ends without `[DONE]`, cannot be checked: the filter throws
 * an UninspectableAnswer and the stage's `on_uninspectable` decides (refused: the same ending with
 * a backend error).
 */
import {
  openaiWire,
  type PolicyDecision,
  type SseEvent,
  type SseFilter,
  type SseVerdict,
  UninspectableAnswer,
} from '../../runtime/index.ts';
import type { Span } from '../classify/api.ts';

const { chunkText, mapChunkText } = openaiWire;

export interface WindowVerdict {
  decision: PolicyDecision;
  /** Spans (offsets into the window text) a redact decision masks. */
  spans: Span[];
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
  /** Characters of streamed text withheld until checked with what follows them (0: forward at once). */
  holdbackChars: number;
  /** May answer at once (then an event that completes a scan step still costs no promise). */
  check(windowText: string): WindowVerdict | Promise<WindowVerdict>;
  /** A rule blocked or redacted: record it (the audit stage writes it before the client sees more). */
  decided(decision: PolicyDecision, scanned: StreamScan): void;
  /** The answer is complete (`[DONE]`) and no rule blocked it; called once. */
  ended?(scanned: StreamScan): void;
  /** The body of the error event that ends a blocked or refused stream. */
  errorBody(reason: PolicyDecision | UninspectableAnswer): unknown;
  mask(text: string, spans: Span[]): string;
}

export function streamCheck(o: StreamCheckOptions): SseFilter {
  return o.holdbackChars > 0 ? new HeldCheck(o) : new WindowCheck(o);
}

/**
 * What both variants share: the window, counters, the parse of an event, and the redaction
 * bookkeeping in absolute offsets (characters since the start of the answer's text).
 */
abstract class StreamCheckBase implements SseFilter {
  protected window = '';
  protected unscanned = 0;
  protected chars = 0;
  protected events = 0;
  protected last: Record<string, unknown> | undefined;
  protected completed = false;
  #redacted = false;
  /** Absolute ranges already masked (kept while they touch the window). */
  #masked: Span[] = [];

  constructor(protected readonly o: StreamCheckOptions) {}

  abstract onEvent(event: SseEvent): Verdict | Promise<Verdict>;

  /** The stream's events after the block or refusal: a `content_filter` finish, the error, `[DONE]`. */
  refuse(err: UninspectableAnswer): SseEvent[] {
    return blockEvents(this.last, this.o.errorBody(err));
  }

  /** The chunk an event carries (undefined for an empty event); throws when it is not JSON. */
  protected parse(event: SseEvent): Record<string, unknown> | undefined {
    if (event.data === '') return undefined;
    try {
      return JSON.parse(event.data) as Record<string, unknown>;
    } catch {
      throw new UninspectableAnswer('invalid_event', 'an event of the stream is not JSON');
    }
  }

  /** Adds a chunk's text to the window (which always keeps the text not scanned yet, whole). */
  protected take(chunk: Record<string, unknown>, text: string, keepAtLeast: number): void {
    this.events++;
    this.chars += text.length;
    this.last = chunk;
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
    return blockEvents(this.last, this.o.errorBody(decision));
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

  /** The verdict's spans in absolute offsets. */
  protected absolute(spans: Span[]): Span[] {
    const base = this.chars - this.window.length;
    // Ranges that left the window can no longer matter.
    this.#masked = this.#masked.filter((r) => r.end > base);
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
  onEvent(event: SseEvent): Verdict | Promise<Verdict> {
    if (event.data === '[DONE]') return this.#beforeDone(event);
    const chunk = this.parse(event);
    const text = chunk ? chunkText(chunk) : '';
    if (!chunk || !text) return undefined;
    this.take(chunk, text, 0);
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
  #beforeDone(done: SseEvent): SseVerdict | Promise<SseVerdict> {
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
    const masked = maskChunk(this.last as Record<string, unknown>, sentEnd, spans, this.o.mask);
    if (masked === undefined) return undefined;
    for (const sp of spans) if (sp.end > sentEnd) this.rememberMasked(sp);
    this.redacted(decision);
    return { masked };
  }
}

type Outcome = { end?: SseEvent[]; masked?: Record<string, unknown> } | undefined;

/** What a check does with an event; undefined passes it as it came. */
type Verdict = SseVerdict | undefined;

/** An event waiting to be released, with the text it adds (empty for events without text). */
interface Held {
  event: SseEvent;
  chunk?: Record<string, unknown>;
  text: string;
}

/**
 * The hold-back variant: events are queued while their text is checked. A batch is released
 * once `holdback + scanEveryChars` characters wait: the window is scanned, then the oldest events
 * go out, whole, while at least `holdback` characters remain held. A block drops everything still held (the
 * client never sees it); a redact masks the held parts of the matched spans; `[DONE]` scans and
 * releases the rest.
 */
class HeldCheck extends StreamCheckBase {
  #held: Held[] = [];
  #heldChars = 0;
  readonly #holdback: number;

  constructor(o: StreamCheckOptions) {
    super(o);
    this.#holdback = o.holdbackChars;
  }

  onEvent(event: SseEvent): Verdict | Promise<Verdict> {
    if (event.data === '[DONE]') return this.#finish([event]);
    const chunk = this.parse(event);
    const text = chunk ? chunkText(chunk) : '';
    if (!chunk || !text) {
      if (this.#held.length === 0) return undefined;
      this.#held.push({ event, chunk, text: '' }); // keeps its place behind the held text
      return { events: [] };
    }
    this.#held.push({ event, chunk, text });
    this.#heldChars += text.length;
    // The window keeps the held text and context before it (a detector may need the words before
    // its span, e.g. `password =`).
    this.take(chunk, text, this.#heldChars + this.o.windowChars - this.o.scanEveryChars);
    if (this.#heldChars < this.#holdback + this.o.scanEveryChars) return { events: [] };
    const blocked = this.#scan(false);
    if (blocked instanceof Promise) return blocked.then((b) => this.#released(b));
    return this.#released(blocked);
  }

  async onEnd(): Promise<SseEvent[]> {
    if (this.completed) return [];
    const blocked = this.unscanned > 0 ? await this.#scan(true) : undefined;
    if (blocked) return blocked;
    throw new UninspectableAnswer('truncated', 'the stream ended without [DONE]');
  }

  #released(blocked: SseEvent[] | undefined): SseVerdict {
    if (blocked) return { events: blocked, end: true };
    return { events: this.#release(this.#holdback) };
  }

  #finish(tail: SseEvent[]): SseVerdict | Promise<SseVerdict> {
    const done = (blocked: SseEvent[] | undefined): SseVerdict => {
      if (blocked) return { events: blocked, end: true };
      this.complete();
      const events = this.#release(0);
      for (const e of tail) events.push(e);
      return { events };
    };
    const blocked = this.unscanned > 0 ? this.#scan(true) : undefined;
    return blocked instanceof Promise ? blocked.then(done) : done(blocked);
  }

  /** Scans the window: on a block, the events that end the stream; else masks what it must in the held events. */
  #scan(atEnd: boolean): SseEvent[] | undefined | Promise<SseEvent[] | undefined> {
    this.unscanned = 0;
    const verdict = this.o.check(this.window);
    if (verdict instanceof Promise) return verdict.then((v) => this.#act(v, atEnd));
    return this.#act(verdict, atEnd);
  }

  #act(verdict: WindowVerdict, atEnd: boolean): SseEvent[] | undefined {
    const decision = verdict.decision;
    if (decision.action === 'block') return this.#drop(this.block(decision, atEnd));
    if (decision.action !== 'redact' || verdict.spans.length === 0) return undefined;
    const sentEnd = this.chars - this.#heldChars;
    const spans = this.absolute(verdict.spans);
    if (spans.some((sp) => this.leaked(sp, sentEnd))) return this.#drop(this.block(this.tooLate(decision), atEnd));
    // What earlier scans masked stays masked (an event is re-masked from its original text).
    const all = [
      ...spans,
      ...this.maskedSpans().filter((m) => !spans.some((sp) => sp.start === m.start && sp.end === m.end)),
    ];
    let start = sentEnd;
    let masked = false;
    for (const h of this.#held) {
      if (h.text !== '' && h.chunk) {
        const chunk = maskChunk(h.chunk, start, all, this.o.mask);
        if (chunk !== undefined) {
          h.event = { ...h.event, data: JSON.stringify(chunk) };
          masked = true;
        }
      }
      start += h.text.length;
    }
    if (masked) {
      for (const sp of spans) if (sp.end > sentEnd) this.rememberMasked(sp);
      this.redacted(decision);
    }
    return undefined;
  }

  /** A block: nothing held goes out. */
  #drop(end: SseEvent[]): SseEvent[] {
    this.#held = [];
    this.#heldChars = 0;
    return end;
  }

  /**
   * Releases the oldest held events, whole, as long as at least `keep` characters stay held. An
   * event that straddles the release point waits for the next scan (whole events only: cutting it
   * there would cost a clone and an extra event per scan, for a few characters of latency).
   */
  #release(keep: number): SseEvent[] {
    const out: SseEvent[] = [];
    while (
      this.#held.length > 0 &&
      (this.#held[0].text === '' || this.#heldChars - this.#held[0].text.length >= keep)
    ) {
      const h = this.#held.shift() as Held;
      this.#heldChars -= h.text.length;
      out.push(h.event);
    }
    return out;
  }
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
function blockEvents(last: Record<string, unknown> | undefined, error: unknown): SseEvent[] {
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
  };
  return [{ data: JSON.stringify(finish) }, { data: JSON.stringify(error) }, { data: '[DONE]' }];
}
