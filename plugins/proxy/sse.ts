/**
 * Filters an SSE answer event by event as it passes (nothing waits for the end of the stream).
 * Each event is parsed (`event:`, `id:`, `data:` lines) and handed to the filters in order; an
 * event a filter returns as is (the same object) is written back byte for byte, any other event
 * is serialised.
 * A filter may end the stream early: the events it returned are written, the rest of the
 * upstream's answer is dropped and the upstream request is cancelled.
 */
import { Transform, type TransformCallback } from 'node:stream';
import type { SseEvent, SseFilter } from '../../runtime/index.ts';

const EVENT_END = /\r\n\r\n|\n\n|\r\r/;
const LINE = /\r\n|\n|\r/;

export class SseFilterTransform extends Transform {
  private buffer = '';
  /** The original text of each parsed event, for byte-for-byte passthrough. */
  private readonly raw = new WeakMap<SseEvent, string>();
  private readonly decoder = new TextDecoder();
  private ended = false;

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
    this.drain().then(() => done(), done);
  }

  override _flush(done: TransformCallback): void {
    if (this.ended) {
      done();
      return;
    }
    this.buffer += this.decoder.decode();
    this.drain()
      .then(async () => {
        if (!this.ended && this.buffer.trim() !== '') await this.process(this.buffer, '');
        if (!this.ended) {
          for (const filter of this.filters) {
            if (filter.onEnd) this.write_(await filter.onEnd());
          }
        }
        done();
      })
      .catch(done);
  }

  private async drain(): Promise<void> {
    let m = EVENT_END.exec(this.buffer);
    while (m && !this.ended) {
      const text = this.buffer.slice(0, m.index);
      const separator = m[0];
      this.buffer = this.buffer.slice(m.index + separator.length);
      await this.process(text, separator);
      m = EVENT_END.exec(this.buffer);
    }
  }

  private async process(text: string, separator: string): Promise<void> {
    const parsed = parseEvent(text);
    this.raw.set(parsed, text + separator);
    let events: SseEvent[] = [parsed];
    for (const filter of this.filters) {
      const next: SseEvent[] = [];
      let end = false;
      for (const event of events) {
        const verdict = await filter.onEvent(event);
        next.push(...verdict.events);
        if (verdict.end) {
          end = true;
          break;
        }
      }
      events = next;
      if (end) {
        this.write_(events);
        this.ended = true;
        this.buffer = '';
        this.push(null);
        this.onEarlyEnd();
        return;
      }
    }
    this.write_(events);
  }

  private write_(events: SseEvent[]): void {
    for (const e of events) this.push(this.raw.get(e) ?? serialise(e));
  }
}

function parseEvent(text: string): SseEvent {
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
