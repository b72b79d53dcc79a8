/**
 * Filters an SSE answer event by event as it passes (nothing waits for the end of the stream).
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
import type { SseEvent, SseFilter, SseVerdict } from '../../runtime/index.ts';

const EVENT_END = /\r\n\r\n|\n\n|\r\r/;
const LINE = /\r\n|\n|\r/;

/** What a filter made of a list of events. */
interface Applied {
  events: SseEvent[];
  end: boolean;
}

export class SseFilterTransform extends Transform {
  private buffer = '';
  /** Text ready to be pushed (pushed once per chunk, or before waiting on a filter). */
  private out = '';
  private readonly decoder = new TextDecoder();
  private ended = false;
  /** The upstream ended mid-event: that last event has no closing blank line. */
  private trailing = false;
  /** What was queued last is that event, as it came: anything written after it must first end it. */
  private unterminated = false;

  /** `onEarlyEnd` runs when a filter ended the stream: cancel the upstream there. */
  constructor(
    private readonly filters: SseFilter[],
    private readonly onEarlyEnd: () => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.ended) {
      done();
      return;
    }
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let waiting: Promise<void> | undefined;
    try {
      waiting = this.drain();
    } catch (err) {
      done(err as Error);
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
    this.buffer += this.decoder.decode();
    this.finish().then(() => done(), done);
  }

  private async finish(): Promise<void> {
    await this.drain();
    if (!this.ended && this.buffer.trim() !== '') {
      this.trailing = true;
      await this.process(this.buffer, '');
    }
    if (!this.ended) {
      for (const filter of this.filters) {
        if (filter.onEnd) this.queue(await filter.onEnd());
      }
    }
    this.pushOut();
  }

  /** Filters the complete events in the buffer; a promise only when a filter answered with one. */
  private drain(): Promise<void> | undefined {
    let m = EVENT_END.exec(this.buffer);
    while (m && !this.ended) {
      const text = this.buffer.slice(0, m.index);
      const separator = m[0];
      this.buffer = this.buffer.slice(m.index + separator.length);
      const waiting = this.process(text, separator);
      if (waiting) {
        // What passed so far goes out now, not after the wait.
        this.pushOut();
        return waiting.then(() => this.drain());
      }
      m = EVENT_END.exec(this.buffer);
    }
    this.pushOut();
    return undefined;
  }

  private process(text: string, separator: string): Promise<void> | undefined {
    const parsed = parseEvent(text);
    return this.filterFrom(0, [parsed], parsed, text + separator);
  }

  /** Runs the filters from index `f` on `events`; `parsed` is the upstream's event, `raw` its text. */
  private filterFrom(f: number, events: SseEvent[], parsed: SseEvent, raw: string): Promise<void> | undefined {
    for (; f < this.filters.length; f++) {
      const applied = applyFilter(this.filters[f], events);
      if (applied instanceof Promise) {
        const next = f + 1;
        return applied.then((a) =>
          this.endsWith(a, parsed, raw) ? undefined : this.filterFrom(next, a.events, parsed, raw),
        );
      }
      if (this.endsWith(applied, parsed, raw)) return undefined;
      events = applied.events;
    }
    this.queue(events, parsed, raw);
    return undefined;
  }

  /** If the filter ended the stream: writes its last events, ends, and says so. */
  private endsWith(applied: Applied, parsed: SseEvent, raw: string): boolean {
    if (!applied.end) return false;
    this.queue(applied.events, parsed, raw);
    this.pushOut();
    this.ended = true;
    this.buffer = '';
    this.push(null);
    this.onEarlyEnd();
    return true;
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
  const out: SseEvent[] = [];
  for (let i = 0; i < events.length; i++) {
    const verdict = filter.onEvent(events[i]);
    if (verdict instanceof Promise) return verdict.then((v) => applyRest(filter, events, i, out, v));
    if (take(out, verdict)) return { events: out, end: true };
  }
  return { events: out, end: false };
}

async function applyRest(
  filter: SseFilter,
  events: SseEvent[],
  i: number,
  out: SseEvent[],
  verdict: SseVerdict,
): Promise<Applied> {
  if (take(out, verdict)) return { events: out, end: true };
  for (let j = i + 1; j < events.length; j++) {
    if (take(out, await filter.onEvent(events[j]))) return { events: out, end: true };
  }
  return { events: out, end: false };
}

/** Adds a verdict's events to `out`; true when it ends the stream. */
function take(out: SseEvent[], verdict: SseVerdict): boolean {
  for (const e of verdict.events) out.push(e);
  return verdict.end === true;
}

function parseEvent(text: string): SseEvent {
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
