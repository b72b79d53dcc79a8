/**
 * A stream's whole body when it is in the stream's buffer already. A small HTTP message's body
 * comes in the chunk of its headers: Node's parser pushes it into the request (and undici into an
 * answer's body) before the next microtask, so a reader that looks then finds it all, and can
 * take it without the listeners, the flowing mode and the promise of a read as it arrives.
 */
import type { Readable } from 'node:stream';

/**
 * The body when all `declaredLength` bytes (its Content-Length, which the HTTP parser holds the
 * message to) are buffered and nobody reads it as it flows; the stream is then resumed to its
 * end, as a read to the end leaves it (its 'end' and 'close' are what the HTTP machinery and the
 * gateway's watchers wait for). Undefined otherwise: read it as it arrives.
 */
export function bufferedWhole(stream: Readable, declaredLength: number): Buffer | undefined {
  if (!(declaredLength > 0) || stream.readableLength !== declaredLength) return undefined;
  if (!stream.readable || stream.readableFlowing === true || stream.readableEncoding !== null) return undefined;
  if (stream.readableObjectMode) return undefined;
  const chunk: unknown = stream.read();
  stream.resume();
  return Buffer.isBuffer(chunk) ? chunk : undefined;
}
