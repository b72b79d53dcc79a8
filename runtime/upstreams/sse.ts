/**
 * A minimal Server-Sent Events reader: yields each event's joined `data:` payload as it arrives,
 * so a caller can stop as soon as the message it waits for has come. The framing is the one
 * parser's of the runtime (runtime/answer/event-stream.ts); events without data are skipped.
 */
import type { Readable } from 'node:stream';
import { EVENT_END, parseEvent } from '../answer/event-stream.ts';

export async function* sseData(stream: Readable): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk as Buffer, { stream: true });
    let end = EVENT_END.exec(buffer);
    while (end) {
      const data = dataOf(buffer.slice(0, end.index));
      buffer = buffer.slice(end.index + end[0].length);
      if (data !== undefined) yield data;
      end = EVENT_END.exec(buffer);
    }
  }
  const data = dataOf(buffer);
  if (data !== undefined) yield data;
}

/** The event's data, or undefined when it has no `data` line (a comment, a bare `event:`). */
function dataOf(text: string): string | undefined {
  const event = parseEvent(text);
  if (event.data === '' && !/(^|[\r\n])data(:|$|[\r\n])/.test(text)) return undefined;
  return event.data;
}
