/**
 * Reads a response body into memory up to a byte cap, decompressing gzip, deflate and brotli.
 * The cap applies to the decoded bytes, so a small compressed "bomb" cannot blow up memory; the
 * read stops (and the connection is dropped) as soon as the cap is passed.
 */
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

export class TooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`body larger than ${limit} bytes`);
  }
}

export class UnsupportedEncodingError extends Error {}

function decoderFor(encoding: string): NodeJS.ReadWriteStream | undefined {
  switch (encoding) {
    case '':
    case 'identity':
      return undefined;
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      throw new UnsupportedEncodingError(`unsupported Content-Encoding "${encoding}"`);
  }
}

export async function readCapped(body: Readable, contentEncoding: string, limit: number): Promise<Buffer> {
  const decoder = decoderFor(contentEncoding.trim().toLowerCase());
  const source: AsyncIterable<Buffer> = decoder ? body.pipe(decoder as NodeJS.WritableStream & Readable) : body;
  if (decoder) body.on('error', (err) => (decoder as unknown as Readable).destroy(err));
  body.on('error', () => {}); // errors reach the loop below; this only silences the destroy's abort
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source) {
      size += chunk.length;
      if (size > limit) throw new TooLargeError(limit);
      chunks.push(chunk);
    }
  } finally {
    // Stops the download when we leave early (cap, error); a no-op after a complete read.
    body.destroy();
    (decoder as unknown as Readable | undefined)?.destroy();
  }
  return Buffer.concat(chunks, size);
}
