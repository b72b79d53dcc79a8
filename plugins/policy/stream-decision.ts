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
import type { SseEvent, SseFilter, SseVerdict, UninspectableAnswer } from '../../runtime/index.ts';

type Verdict = SseVerdict | undefined;

export class DecisionOnLastEvent implements SseFilter {
  /**
   * The last text-less event the check let through, not sent yet: it may be the last before
   * `[DONE]`. One at most (an upstream sending many only ever has its latest held).
   */
  #held: SseEvent | undefined;

  constructor(
    private readonly check: SseFilter,
    private readonly summary: () => Record<string, unknown> | undefined,
  ) {}

  onEvent(event: SseEvent): Verdict | Promise<Verdict> {
    const verdict = this.check.onEvent(event);
    return verdict instanceof Promise ? verdict.then((v) => this.#after(event, v)) : this.#after(event, verdict);
  }

  async onEnd(): Promise<SseEvent[]> {
    const events = (await this.check.onEnd?.()) ?? [];
    return this.#release(events);
  }

  refuse(err: UninspectableAnswer): SseEvent[] {
    return this.#release(this.check.refuse?.(err) ?? []);
  }

  #after(input: SseEvent, verdict: Verdict): Verdict {
    // The cheap path: a text event passed as it is, nothing held.
    if (verdict === undefined && this.#held === undefined && !textless(input)) return undefined;
    // The other cheap path: the check holds the event (nothing goes out, nothing to decorate).
    if (verdict !== undefined && verdict.events.length === 0 && !verdict.end) return verdict;
    const out = verdict === undefined ? [input] : verdict.events;
    if (verdict?.end) return { events: this.#release(out), end: true };
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
    if (!summary) return event;
    const chunk = JSON.parse(event.data) as Record<string, unknown>;
    return { ...event, data: JSON.stringify({ ...chunk, filter_decision: summary }) };
  }
}

/**
 * A chunk with no text for the client to see: no choices (usage), or every choice finished with
 * an empty delta. Decided on the raw data first: most chunks have neither marker.
 */
function textless(event: SseEvent): boolean {
  const data = event.data;
  if (!data.includes('"choices":[]') && !data.includes('"finish_reason":"')) return false;
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    return false;
  }
  const choices = (chunk as { choices?: unknown })?.choices;
  if (!Array.isArray(choices)) return false;
  return choices.every((c: { finish_reason?: unknown; delta?: Record<string, unknown>; text?: unknown }) => {
    if (typeof c?.finish_reason !== 'string') return false;
    if (typeof c.text === 'string' && c.text !== '') return false;
    const delta = c.delta ?? {};
    return !delta.content && !delta.tool_calls && !delta.function_call && !delta.refusal;
  });
}
