/**
 * A minimal Server-Sent Events reader: yields each event's joined `data:` payload as it arrives,
 * so a caller can stop as soon as the message it waits for has come.
 */
import type { Readable } from 'node:stream';

export async function* sseData(stream: Readable): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk as Buffer, { stream: true });
    let end = eventEnd(buffer);
    while (end) {
      const data = dataOf(buffer.slice(0, end.index));
      buffer = buffer.slice(end.index + end.length);
      if (data !== undefined) yield data;
      end = eventEnd(buffer);
    }
  }
  const data = dataOf(buffer);
  if (data !== undefined) yield data;
}

/** Position of the first blank line (event separator), whatever the line endings. */
export function eventEnd(buffer: string): { index: number; length: number } | undefined {
  const m = /\r\n\r\n|\n\n|\r\r/.exec(buffer);
  return m ? { index: m.index, length: m[0].length } : undefined;
}

/** The `data:` lines of one event joined with newlines, or undefined when it has none. */
export function dataOf(event: string): string | undefined {
  let data: string[] | undefined;
  for (const line of event.split(/\r\n|\n|\r/)) {
    if (line === 'data' || line.startsWith('data:')) {
      const value = line.slice(5);
      data = data ?? [];
      data.push(value.startsWith(' ') ? value.slice(1) : value);
    }
  }
  return data?.join('\n');
}
