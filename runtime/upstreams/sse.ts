/**
 * A minimal Server-Sent Events reader: yields each event's joined `data:` payload as it arrives,
 * so a caller can stop as soon as the message it waits for has come. The framing is the one
 * parser's of the runtime (runtime/answer/event-framer.ts, linear in the text); events without
 * data are skipped.
 */
import type { Readable } from 'node:stream';
import { EventFramer, type FramedEvent } from '../answer/event-framer.ts';
import { parseEvent } from '../answer/event-stream.ts';

/** The longest event read (characters): the default of `limits.answer_bytes`, 16 MiB. */
export const maxSseEventChars = 16 * 1024 * 1024;

/** Throws (the call fails) when an event grows past `maxEventChars`: an upstream that never ends one. */
export async function* sseData(stream: Readable, maxEventChars = maxSseEventChars): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const framer = new EventFramer();
  const events: FramedEvent[] = [];
  for await (const chunk of stream) {
    framer.push(decoder.decode(chunk as Buffer, { stream: true }), events);
    for (const event of events.splice(0)) {
      const data = dataOf(event.text);
      if (data !== undefined) yield data;
    }
    if (framer.pendingLength > maxEventChars) {
      stream.destroy();
      throw new Error(`an event of the upstream's stream is longer than ${maxEventChars} characters`);
    }
  }
  framer.push(decoder.decode(), events);
  for (const event of events) {
    const data = dataOf(event.text);
    if (data !== undefined) yield data;
  }
  const data = dataOf(framer.rest());
  if (data !== undefined) yield data;
}

/** The event's data, or undefined when it has no `data` line (a comment, a bare `event:`). */
function dataOf(text: string): string | undefined {
  const event = parseEvent(text);
  if (event.data === '' && !/(^|[\r\n])data(:|$|[\r\n])/.test(text)) return undefined;
  return event.data;
}
