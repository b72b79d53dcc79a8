/**
 * Content decoding of upstream answers, done once by the runtime before any stage reads them, with
 * a bound on the decoded size (a few KiB of gzip can stand for gigabytes). Only the encodings of
 * RFC 9110 that Node decodes are known; anything else cannot be read, and a stage that must read
 * the answer refuses it (UninspectableAnswer `encoding`).
 */
import type { Readable, Transform } from 'node:stream';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import { UninspectableAnswer } from './uninspectable.ts';

type Decoder = (input: Buffer, options: zlib.ZlibOptions & zlib.BrotliOptions) => Promise<Buffer>;

const gunzip = promisify(zlib.gunzip) as Decoder;
const brotli = promisify(zlib.brotliDecompress) as Decoder;
const inflate = promisify(zlib.inflate) as Decoder;
const inflateRaw = promisify(zlib.inflateRaw) as Decoder;

/** `deflate` is meant to be zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw deflate. */
const deflate: Decoder = (input, options) => inflate(input, options).catch(() => inflateRaw(input, options));

const decoders: Record<string, Decoder> = { gzip: gunzip, 'x-gzip': gunzip, br: brotli, deflate };
const streamDecoders: Record<string, () => Transform> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  br: () => zlib.createBrotliDecompress(),
  deflate: () => zlib.createInflate(),
};

/** The codings of a Content-Encoding header, in the order they were applied (`identity` left out). */
export function encodingsOf(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const value = Array.isArray(header) ? header.join(',') : header;
  const out: string[] = [];
  for (const part of value.split(',')) {
    const coding = part.trim().toLowerCase();
    if (coding !== '' && coding !== 'identity') out.push(coding);
  }
  return out;
}

/** Decodes a whole body (the codings undone last-applied first), refusing more than `maxBytes`. */
export async function decodeBody(body: Buffer, encodings: string[], maxBytes: number): Promise<Buffer> {
  let out = body;
  for (let i = encodings.length - 1; i >= 0; i--) {
    const decoder = decoders[encodings[i]];
    if (!decoder) throw unknownEncoding(encodings[i]);
    try {
      out = await decoder(out, { maxOutputLength: maxBytes });
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new UninspectableAnswer('too_large', `the decoded answer is larger than ${maxBytes} bytes`);
      }
      throw new UninspectableAnswer('encoding', `the answer is not valid ${encodings[i]}`, { cause: err });
    }
  }
  return out;
}

/** Throws UninspectableAnswer when one of the codings cannot be undone. */
export function checkDecodable(encodings: string[]): void {
  for (const e of encodings) if (!streamDecoders[e]) throw unknownEncoding(e);
}

/** A stream that undoes the codings as the body passes (for event streams). */
export function decodingStream(body: Readable, encodings: string[]): Readable {
  checkDecodable(encodings);
  let out: Readable = body;
  for (let i = encodings.length - 1; i >= 0; i--) {
    const decoder = streamDecoders[encodings[i]]();
    const source = out;
    source.once('error', (err) => decoder.destroy(err));
    out = source.pipe(decoder);
  }
  return out;
}

function unknownEncoding(coding: string): UninspectableAnswer {
  return new UninspectableAnswer('encoding', `content encoding "${coding}" cannot be decoded`);
}
