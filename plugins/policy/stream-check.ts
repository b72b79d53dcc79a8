/**
 * Egress checks on a streamed answer (OpenAI-style SSE chunks), as it passes. The text of the
 * chunks goes into a sliding window of `windowChars`; every `scanEveryChars` of new text (and at
 * the end) the window is checked, so a match that spans chunks is still seen, and the cost does
 * not grow with the length of the answer. Chunks are forwarded as they come: the time to first
 * token is the backend's. When a rule blocks, the stream ends with a `content_filter` finish, an
 * error event and `[DONE]`; a redact rule masks what is still unsent of the matched spans.
 */
import {
  openaiWire,
  type PolicyDecision,
  type SseEvent,
  type SseFilter,
  type SseVerdict,
} from '../../runtime/index.ts';
import type { Span } from '../classify/api.ts';

const { chunkText, mapChunkText } = openaiWire;

export interface WindowVerdict {
  decision: PolicyDecision;
  /** Spans (offsets into the window text) a redact decision masks. */
  spans: Span[];
}

export interface StreamCheckOptions {
  windowChars: number;
  scanEveryChars: number;
  /**
   * Characters of streamed text withheld until checked with what follows them (0: forward at
   * once). With a hold-back, text reaches the client only after a scan that saw it with at least
   * this many characters after it, so a match no longer than that is blocked or masked before any
   * of it is sent, at the price of that much delay before the first token.
   */
  holdbackChars?: number;
  /** May answer at once (then an event that completes a scan step still costs no promise). */
  check(windowText: string): WindowVerdict | Promise<WindowVerdict>;
  /** A rule blocked or redacted: record it (decision list, audit) before the client sees the end. */
  decided(decision: PolicyDecision, scanned: { chars: number; events: number }): Promise<void>;
  /**
   * The answer is complete (`[DONE]`, or the upstream's end) and no rule blocked it; called once,
   * and not when the client went away first.
   */
  ended?(): void;
  /** The body of the error event that ends a blocked stream. */
  errorBody(decision: PolicyDecision): unknown;
  mask(text: string, spans: Span[]): string;
}

export function streamCheck(o: StreamCheckOptions): SseFilter {
  if (o.holdbackChars && o.holdbackChars > 0) return heldStreamCheck(o, o.holdbackChars);
  return new WindowCheck(o);
}

type ScanOutcome = { end?: SseEvent[]; masked?: string } | undefined;

/**
 * The default check: chunks go out as they come. A class (state in fields, methods on the
 * prototype) since one is made per streamed answer. An event is answered without a promise unless
 * the check waits (a model) or a decision must be recorded: most of a stream's events cost a JSON
 * parse and a string append, and a scan step a classification.
 */
class WindowCheck implements SseFilter {
  #window = '';
  #unscanned = 0;
  #chars = 0;
  #events = 0;
  #last: Record<string, unknown> | undefined;
  #redacted = false;
  #completed = false;

  constructor(private readonly o: StreamCheckOptions) {}

  onEvent(event: SseEvent): SseVerdict | Promise<SseVerdict> {
    if (event.data === '[DONE]') return this.#beforeDone(event);
    if (event.data === '') return { events: [event] };
    let chunk: unknown;
    try {
      chunk = JSON.parse(event.data);
    } catch {
      return { events: [event] };
    }
    const text = chunkText(chunk);
    if (!text) return { events: [event] };
    this.#events++;
    this.#chars += text.length;
    this.#last = chunk as Record<string, unknown>;
    this.#window = (this.#window + text).slice(-this.o.windowChars);
    this.#unscanned += text.length;
    if (this.#unscanned < this.o.scanEveryChars) return { events: [event] };
    const outcome = this.#scan(text);
    if (outcome instanceof Promise) return outcome.then((o) => this.#verdict(event, o));
    return this.#verdict(event, outcome);
  }

  async onEnd(): Promise<SseEvent[]> {
    const outcome = this.#unscanned === 0 ? undefined : await this.#scan('');
    if (outcome?.end) return outcome.end;
    this.#complete();
    return [];
  }

  /** The text after the last scan is checked before `[DONE]`: a block there must reach the client. */
  #beforeDone(done: SseEvent): SseVerdict | Promise<SseVerdict> {
    const outcome = this.#unscanned === 0 ? undefined : this.#scan('');
    const verdict = (o: ScanOutcome): SseVerdict => {
      if (o?.end) return { events: o.end, end: true };
      this.#complete();
      return { events: [done] };
    };
    return outcome instanceof Promise ? outcome.then(verdict) : verdict(outcome);
  }

  /** Says once that the answer is complete: at `[DONE]`, before the client has it, or at the upstream's end. */
  #complete(): void {
    if (this.#completed) return;
    this.#completed = true;
    this.o.ended?.();
  }

  #verdict(event: SseEvent, outcome: ScanOutcome): SseVerdict {
    if (outcome?.end) return { events: outcome.end, end: true };
    if (outcome?.masked !== undefined) {
      const masked = replaceText(this.#last as Record<string, unknown>, outcome.masked);
      return { events: [{ ...event, data: JSON.stringify(masked) }] };
    }
    return { events: [event] };
  }

  /** Checks the window; `current` is the text of the chunk being decided ('' at the end). */
  #scan(current: string): ScanOutcome | Promise<ScanOutcome> {
    this.#unscanned = 0;
    const verdict = this.o.check(this.#window);
    if (verdict instanceof Promise) return verdict.then((v) => this.#act(v, current));
    return this.#act(verdict, current);
  }

  /** What a verdict does to the stream; waits only to record a block or a first redaction. */
  #act(verdict: WindowVerdict, current: string): ScanOutcome | Promise<ScanOutcome> {
    const o = this.o;
    const action = verdict.decision.action;
    if (action === 'deny') {
      const end = blockEvents(this.#last, o.errorBody(verdict.decision));
      return o.decided(verdict.decision, this.#scanned()).then(() => ({ end }));
    }
    if (action === 'redact' && current) {
      // Only the current chunk is still ours to change: mask the parts of spans that fall in it.
      const start = this.#window.length - current.length;
      const inChunk = verdict.spans
        .filter((sp) => sp.end > start)
        .map((sp) => ({ ...sp, start: Math.max(0, sp.start - start), end: sp.end - start }));
      if (inChunk.length > 0) {
        const masked = { masked: o.mask(current, inChunk) };
        if (this.#redacted) return masked;
        this.#redacted = true;
        return o.decided(verdict.decision, this.#scanned()).then(() => masked);
      }
    }
    return undefined;
  }

  #scanned(): { chars: number; events: number } {
    return { chars: this.#chars, events: this.#events };
  }
}

/** An event waiting to be released, with the text it adds (empty for events without text). */
interface Held {
  event: SseEvent;
  chunk?: Record<string, unknown>;
  text: string;
}

/**
 * The hold-back variant: events are queued while their text is checked. A batch is released
 * once `holdback + scanEveryChars` characters wait: the window is scanned, then the oldest events
 * go out until only `holdback` characters remain held. A block drops everything still held (the
 * client never sees it); a redact masks the held parts of the matched spans; the end of the stream
 * (`[DONE]` or the upstream's end) scans and releases the rest.
 */
function heldStreamCheck(o: StreamCheckOptions, holdback: number): SseFilter {
  let window = '';
  let held: Held[] = [];
  let heldChars = 0;
  let chars = 0;
  let events = 0;
  let last: Record<string, unknown> | undefined;
  let redacted = false;
  let completed = false;
  const windowChars = Math.max(o.windowChars, holdback + o.scanEveryChars);

  /** Scans the window; on a block, the events that end the stream; else the held events, masked where needed. */
  const scan = async (): Promise<SseEvent[] | undefined> => {
    const verdict = await o.check(window);
    const action = verdict.decision.action;
    if (action === 'deny') {
      await o.decided(verdict.decision, { chars, events });
      held = [];
      heldChars = 0;
      return blockEvents(last, o.errorBody(verdict.decision));
    }
    if (action === 'redact' && verdict.spans.length > 0) {
      // The held text is the window's tail: mask the parts of the spans that fall in it.
      let start = window.length - heldChars;
      let masked = false;
      for (const h of held) {
        const end = start + h.text.length;
        const touching = verdict.spans.filter((sp) => sp.end > start && sp.start < end);
        if (touching.length > 0 && h.chunk) {
          // A span gets its placeholder in the chunk where it starts; its continuation in later
          // chunks is dropped, so a span split across chunks reads as one placeholder.
          const local = (sp: { start: number; end: number }) => ({
            start: Math.max(0, sp.start - start),
            end: Math.min(h.text.length, sp.end - start),
          });
          const heads = touching.filter((sp) => sp.start >= start).map((sp) => ({ ...sp, ...local(sp) }));
          // Continuations all start at this chunk's first character: drop up to the furthest end.
          const cut = Math.max(0, ...touching.filter((sp) => sp.start < start).map((sp) => local(sp).end));
          const shifted = heads
            .filter((sp) => sp.end > cut)
            .map((sp) => ({ ...sp, start: Math.max(0, sp.start - cut), end: sp.end - cut }));
          const text = o.mask(h.text.slice(cut), shifted);
          h.event = { ...h.event, data: JSON.stringify(replaceText(h.chunk, text)) };
          masked = true;
        }
        start = end;
      }
      if (masked && !redacted) {
        redacted = true;
        await o.decided(verdict.decision, { chars, events });
      }
    }
    return undefined;
  };

  /** Releases the oldest held events until at most `keep` characters stay held. */
  const release = (keep: number): SseEvent[] => {
    const out: SseEvent[] = [];
    while (held.length > 0 && (heldChars > keep || held[0].text === '')) {
      const h = held.shift() as Held;
      heldChars -= h.text.length;
      out.push(h.event);
    }
    return out;
  };

  const finish = async (tail: SseEvent[]): Promise<{ events: SseEvent[]; end?: boolean }> => {
    const blocked = heldChars > 0 ? await scan() : undefined;
    if (blocked) return { events: blocked, end: true };
    if (!completed) {
      completed = true;
      o.ended?.();
    }
    return { events: [...release(0), ...tail] };
  };

  return {
    async onEvent(event) {
      if (event.data === '[DONE]') return finish([event]);
      let chunk: Record<string, unknown> | undefined;
      try {
        chunk = event.data === '' ? undefined : (JSON.parse(event.data) as Record<string, unknown>);
      } catch {
        chunk = undefined;
      }
      const text = chunk ? chunkText(chunk) : '';
      if (!text) {
        if (held.length === 0) return { events: [event] };
        held.push({ event, chunk, text: '' }); // keeps its place behind the held text
        return { events: [] };
      }
      events++;
      chars += text.length;
      last = chunk;
      window = (window + text).slice(-windowChars);
      held.push({ event, chunk, text });
      heldChars += text.length;
      if (heldChars < holdback + o.scanEveryChars) return { events: [] };
      const blocked = await scan();
      if (blocked) return { events: blocked, end: true };
      return { events: release(holdback) };
    },
    async onEnd() {
      const out = await finish([]);
      return out.events;
    },
  };
}

/**
 * The chunk with `text`, a masked form of its text, in place of its text. The fields before and
 * after the stretch that masking changed keep their text; the stretch goes to the field where it
 * starts. A chunk with one text field (as backends send them: content, or a tool call's arguments)
 * is masked in that field; the fields' texts always add up to `text`.
 */
function replaceText(chunk: Record<string, unknown>, text: string): Record<string, unknown> {
  const original = chunkText(chunk);
  if (original === '') return mapChunkText(chunk, (t) => t);
  const common = Math.min(original.length, text.length);
  let head = 0;
  while (head < common && original.charCodeAt(head) === text.charCodeAt(head)) head++;
  // The stretch starts at a character of the original, so that some field owns it.
  head = Math.min(head, original.length - 1);
  let tail = 0;
  while (
    tail < common - head &&
    original.charCodeAt(original.length - 1 - tail) === text.charCodeAt(text.length - 1 - tail)
  ) {
    tail++;
  }
  const end = original.length - tail;
  const middle = text.slice(head, text.length - tail);
  return mapChunkText(chunk, (field, offset) => {
    const fieldEnd = offset + field.length;
    const before = offset < head ? field.slice(0, Math.min(field.length, head - offset)) : '';
    const owner = offset <= head && head < fieldEnd;
    const after = fieldEnd > end ? field.slice(Math.max(0, end - offset)) : '';
    return before + (owner ? middle : '') + after;
  });
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
