/**
 * The decision of a stream on its last event, without adding an event OpenAI clients do not
 * expect. A chunk with no choices is sent by the API only to a client that asked for usage
 * (`stream_options.include_usage`); a client that did not ask reads `choices[0]` of every chunk.
 * So the decision rides on the last event the upstream sent anyway: the events that carry no
 * text (a choice's finish chunk, the usage chunk) are held until the next event (the latest one
 * only), and when that is `[DONE]` it gets `filter_decision`. They cost no time to first token (they come
 * last, right before `[DONE]`). A stream without such an event (a provider that sends no finish
 * chunk) carries its decision in the `X-Filter-Decision` trailer only. A blocked stream's
 * `content_filter` finish carries it already (stream-check.ts).
 */
import {
  chunkOf,
  type OpenAIChunk,
  type OpenAIStreamReader,
  type SseEvent,
  type SseVerdict,
  type UninspectableAnswer,
} from '../../runtime/index.ts';

type Verdict = SseVerdict | undefined;

/** A reader of the stream that answers `[DONE]` and the end itself (the check, stream-check.ts). */
type Check = Required<Pick<OpenAIStreamReader, 'onChunk' | 'onDone' | 'onEnd'>> & Pick<OpenAIStreamReader, 'refuse'>;

export class DecisionOnLastEvent implements OpenAIStreamReader {
  /**
   * The last text-less event the check let through, not sent yet: it may be the last before
   * `[DONE]`. One at most (an upstream sending many only ever has its latest held).
   */
  #held: SseEvent | undefined;

  constructor(
    private readonly check: Check,
    private readonly summary: () => Record<string, unknown> | undefined,
  ) {}

  onChunk(chunk: OpenAIChunk): Verdict | Promise<Verdict> {
    const verdict = this.check.onChunk(chunk);
    return verdict instanceof Promise ? verdict.then((v) => this.#after(chunk, v)) : this.#after(chunk, verdict);
  }

  onDone(done: SseEvent): Verdict | Promise<Verdict> {
    const verdict = this.check.onDone(done);
    const after = (v: Verdict) => this.#after(undefined, v ?? { events: [done] });
    return verdict instanceof Promise ? verdict.then(after) : after(verdict);
  }

  async onEnd(): Promise<SseEvent[]> {
    const events = (await this.check.onEnd()) ?? [];
    return this.#release(events);
  }

  refuse(err: UninspectableAnswer): SseEvent[] {
    return this.#release(this.check.refuse?.(err) ?? []);
  }

  /** `input`: the chunk the check was given (undefined for `[DONE]`, which the check always answers). */
  #after(input: OpenAIChunk | undefined, verdict: Verdict): Verdict {
    // The other cheap path: the check holds the event (nothing goes out, nothing to decorate).
    if (verdict !== undefined && verdict.events.length === 0 && !verdict.end) return verdict;
    if (verdict === undefined) {
      // The cheap path: a text event passed as it is, nothing held.
      const chunk = input as OpenAIChunk;
      // A content-only chunk (the wire view knows it without parsing) has text.
      const textless = !chunk.contentOnly && isTextless(chunk.json);
      if (this.#held === undefined && !textless) return undefined;
      const events: SseEvent[] = [];
      if (this.#held) events.push(this.#held);
      this.#held = textless ? (input as OpenAIChunk).event : undefined;
      if (!textless) events.push((input as OpenAIChunk).event);
      return { events };
    }
    const out = verdict.events;
    if (verdict.end) return { events: this.#release(out), end: true };
    const events: SseEvent[] = [];
    for (const e of out) {
      const done = e.data === '[DONE]';
      if (done && this.#held) this.#held = this.#decorated(this.#held);
      if (this.#held) events.push(this.#held);
      this.#held = undefined;
      if (!done && textless(e)) this.#held = e;
      else events.push(e);
    }
    return { events };
  }

  /** What is held goes out before `events` (the stream ends or is refused). */
  #release(events: SseEvent[]): SseEvent[] {
    const held = this.#held;
    this.#held = undefined;
    return held ? [held, ...events] : events;
  }

  /** `event` (the upstream's last before `[DONE]`) with `filter_decision`. */
  #decorated(event: SseEvent): SseEvent {
    const summary = this.summary();
    const chunk = chunkOf(event);
    if (!summary || !chunk) return event;
    return { ...event, data: JSON.stringify({ ...chunk.json, filter_decision: summary }) };
  }
}

/**
 * Whether an event the check let out is a chunk with no text for the client to see. Decided on
 * the raw data first (most chunks have neither marker), then on the chunk the wire view parsed.
 */
function textless(event: SseEvent): boolean {
  const data = event.data;
  if (!data.includes('"choices":[]') && !data.includes('"finish_reason":"')) return false;
  const chunk = chunkOf(event);
  return chunk !== null && isTextless(chunk.json);
}

/** A chunk with no text for the client to see: no choices (usage), or every choice finished with an empty delta. */
function isTextless(chunk: Readonly<Record<string, unknown>>): boolean {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return false;
  for (let i = 0; i < choices.length; i++) {
    const c = choices[i] as { finish_reason?: unknown; delta?: Record<string, unknown>; text?: unknown } | null;
    if (typeof c?.finish_reason !== 'string') return false;
    if (typeof c.text === 'string' && c.text !== '') return false;
    const delta = c.delta;
    if (delta && (delta.content || delta.tool_calls || delta.function_call || delta.refusal)) return false;
  }
  return true;
}
