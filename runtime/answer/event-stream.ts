/**
 * Filters an SSE answer event by event as it passes (nothing waits for the end of the stream).
 * The runtime runs it when answer-phase stages added filters to an event-stream answer.
 * Each event is parsed (`event:`, `id:`, `data:` lines) and handed to the filters in order; an
 * event a filter returns as is (the same object) is written back byte for byte, any other event
 * is serialised.
 * A filter may end the stream early: the events it returned are written, the rest of the
 * upstream's answer is dropped and the upstream request is cancelled.
 *
 * A stream carries many small events, so the common case costs no promise: filters that answer
 * at once are applied synchronously, and only a filter that returns a promise (e.g. a check that
 * runs a classifier) makes the rest of that chunk wait for it. What one upstream chunk yields
 * goes out in one write.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { EventFramer, type FramedEvent } from './event-framer.ts';
import { UninspectableAnswer } from './uninspectable.ts';

/** One server-sent event: `data` is its data lines joined with newlines. */
export interface SseEvent {
  event?: string;
  id?: string;
  data: string;
}

/** What a filter does with an event: the events to write in its place, and whether the stream ends after them. */
export interface SseVerdict {
  events: SseEvent[];
  /** End the stream after these events (the upstream's remaining answer is dropped). */
  end?: boolean;
}

export interface SseFilter {
  /**
   * Answer at once whenever possible (a promise per event costs more than most filters' work);
   * `undefined` passes the event as it is, the cheapest answer (nothing is allocated).
   * Throw an UninspectableAnswer for an event the filter must read but cannot: the stage's
   * `on_uninspectable` decides (see `refuse`).
   */
  onEvent(event: SseEvent): SseVerdict | undefined | Promise<SseVerdict | undefined>;
  /** The upstream's stream ended: events to append before the end (may throw UninspectableAnswer, e.g. no terminator). */
  onEnd?(): SseEvent[] | Promise<SseEvent[]>;
  /**
   * The events that end the stream when the filter's stage refuses an answer it could not read
   * (in the protocol's own terms: an error event, a final chunk...). Without it the connection
   * is cut, so the client sees a broken answer rather than a complete one.
   */
  refuse?(err: UninspectableAnswer): SseEvent[];
}

const LINE = /\r\n|\n|\r/;

/** What a filter made of a list of events. */
interface Applied {
  events: SseEvent[];
  end: boolean;
}

export class SseFilterTransform extends Transform {
  /** The events the upstream completed, cut in linear time (event-framer.ts). */
  private readonly framer = new EventFramer();
  /** Complete events not filtered yet (a filter that waits holds the rest of a chunk's). */
  private readonly ready: FramedEvent[] = [];
  private readyAt = 0;
  /** Text ready to be pushed (pushed once per chunk, or before waiting on a filter). */
  private out = '';
  private readonly decoder = new TextDecoder();
  private ended = false;
  /** The upstream ended mid-event: that last event has no closing blank line. */
  private trailing = false;
  /** What was queued last is that event, as it came: anything written after it must first end it. */
  private unterminated = false;

  /**
   * `onEarlyEnd` runs when a filter ended the stream: cancel the upstream there. An event longer
   * than `maxEventChars` (an upstream that never ends one) fails the stream rather than grow.
   */
  constructor(
    private readonly filters: SseFilter[],
    private readonly onEarlyEnd: () => void,
    private readonly maxEventChars = Number.POSITIVE_INFINITY,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.ended) {
      done();
      return;
    }
    this.framer.push(this.decoder.decode(chunk, { stream: true }), this.ready);
    let waiting: Promise<void> | undefined;
    try {
      waiting = this.drain();
    } catch (err) {
      done(err as Error);
      return;
    }
    if (!waiting && this.framer.pendingLength > this.maxEventChars) {
      done(new UninspectableAnswer('too_large', `an event is longer than ${this.maxEventChars} characters`));
      return;
    }
    if (waiting) waiting.then(() => done(), done);
    else done();
  }

  override _flush(done: TransformCallback): void {
    if (this.ended) {
      done();
      return;
    }
    this.framer.push(this.decoder.decode(), this.ready);
    this.finish().then(() => done(), done);
  }

  private async finish(): Promise<void> {
    await this.drain();
    const rest = this.framer.rest();
    if (!this.ended && rest.trim() !== '') {
      this.trailing = true;
      await this.process(rest, '');
    }
    // Each filter's closing events pass through the filters after it (outer stages see them too).
    for (let f = 0; f < this.filters.length && !this.ended; f++) {
      const onEnd = this.filters[f].onEnd;
      if (!onEnd) continue;
      const tail = await onEnd.call(this.filters[f]);
      if (tail.length > 0) await this.filterFrom(f + 1, tail, undefined, undefined, false);
    }
    this.pushOut();
  }

  /** Filters the complete events taken; a promise only when a filter answered with one. */
  private drain(): Promise<void> | undefined {
    while (this.readyAt < this.ready.length && !this.ended) {
      const { text, separator } = this.ready[this.readyAt++];
      const waiting = this.process(text, separator);
      if (waiting) {
        // What passed so far goes out now, not after the wait.
        this.pushOut();
        return waiting.then(() => this.drain());
      }
    }
    this.ready.length = 0;
    this.readyAt = 0;
    this.pushOut();
    return undefined;
  }

  private process(text: string, separator: string): Promise<void> | undefined {
    const parsed = parseEvent(text);
    return this.filterFrom(0, [parsed], parsed, text + separator);
  }

  /**
   * Runs the filters from index `f` on `events`; `parsed` is the upstream's event, `raw` its text.
   * A filter that ends the stream still hands its last events to the filters after it (the stages
   * further out see how the stream ends), then the stream ends.
   */
  private filterFrom(
    f: number,
    events: SseEvent[],
    parsed: SseEvent | undefined,
    raw: string | undefined,
    ending = false,
  ): Promise<void> | undefined {
    for (; f < this.filters.length; f++) {
      const applied = applyFilter(this.filters[f], events);
      if (applied instanceof Promise) {
        const next = f + 1;
        return applied.then((a) => this.filterFrom(next, a.events, parsed, raw, ending || a.end));
      }
      events = applied.events;
      ending ||= applied.end;
    }
    this.queue(events, parsed, raw);
    if (ending) this.endEarly();
    return undefined;
  }

  /** A filter ended the stream: writes what is queued, ends, and cancels the upstream. */
  private endEarly(): void {
    this.pushOut();
    this.ended = true;
    this.framer.clear();
    this.ready.length = 0;
    this.readyAt = 0;
    this.push(null);
    this.onEarlyEnd();
  }

  /** Queues events for writing: the upstream's own event as it came, any other serialised. */
  private queue(events: SseEvent[], parsed?: SseEvent, raw?: string): void {
    for (const e of events) {
      if (this.unterminated) {
        this.out += '\n\n';
        this.unterminated = false;
      }
      if (e === parsed) {
        this.out += raw as string;
        this.unterminated = this.trailing;
      } else this.out += serialise(e);
    }
  }

  private pushOut(): void {
    if (this.out === '') return;
    this.push(this.out);
    this.out = '';
  }
}

/** The filter's verdicts on each of `events`, in order; a promise from the first one that waits. */
function applyFilter(filter: SseFilter, events: SseEvent[]): Applied | Promise<Applied> {
  // Made only when a verdict is not a plain pass: most events of most streams pass unchanged.
  let out: SseEvent[] | undefined;
  for (let i = 0; i < events.length; i++) {
    const verdict = filter.onEvent(events[i]);
    if (verdict instanceof Promise) {
      const upto = out ?? events.slice(0, i);
      return verdict.then((v) => applyRest(filter, events, i, upto, v));
    }
    if (verdict === undefined) {
      out?.push(events[i]);
      continue;
    }
    out ??= events.slice(0, i);
    if (take(out, verdict, events[i])) return { events: out, end: true };
  }
  return { events: out ?? events, end: false };
}

async function applyRest(
  filter: SseFilter,
  events: SseEvent[],
  i: number,
  out: SseEvent[],
  verdict: SseVerdict | undefined,
): Promise<Applied> {
  if (take(out, verdict, events[i])) return { events: out, end: true };
  for (let j = i + 1; j < events.length; j++) {
    if (take(out, await filter.onEvent(events[j]), events[j])) return { events: out, end: true };
  }
  return { events: out, end: false };
}

/** Adds a verdict's events (the event itself for `undefined`) to `out`; true when it ends the stream. */
function take(out: SseEvent[], verdict: SseVerdict | undefined, event: SseEvent): boolean {
  if (verdict === undefined) {
    out.push(event);
    return false;
  }
  for (const e of verdict.events) out.push(e);
  return verdict.end === true;
}

/** One event's text (without its closing blank line), parsed: the runtime's one SSE parser. */
export function parseEvent(text: string): SseEvent {
  // The common case: one `data:` line.
  if (text.startsWith('data:') && text.indexOf('\n') === -1 && text.indexOf('\r') === -1) {
    return { data: text.charCodeAt(5) === 0x20 ? text.slice(6) : text.slice(5) };
  }
  const event: SseEvent = { data: '' };
  const data: string[] = [];
  for (const line of text.split(LINE)) {
    if (line === 'data' || line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    else if (line.startsWith('event:')) event.event = line.slice(6).trim();
    else if (line.startsWith('id:')) event.id = line.slice(3).trim();
  }
  event.data = data.join('\n');
  return event;
}

/** A new or changed event (a filter's result carries no `raw`). */
export function serialise(e: SseEvent): string {
  let out = '';
  if (e.id) out += `id: ${e.id}\n`;
  if (e.event) out += `event: ${e.event}\n`;
  for (const line of e.data.split('\n')) out += `data: ${line}\n`;
  return `${out}\n`;
}
