/**
 * A provider's answers scrubbed of the provider's own key before anyone else sees them. Some
 * providers echo the credential they were sent (a 401 body quoting "Incorrect API key provided:
 * sk-…", a debugging header); relayed as is, the gateway's key would reach the client that caused
 * the error. Every occurrence of the key (and of its JSON-escaped form) in a header value or the
 * body is overwritten with a marker of the same length, so Content-Length and the framing stay
 * true and nothing has to be buffered: the body is scrubbed as it streams, holding back only a
 * chunk's last bytes while they could be the start of the key (an SSE event's end never is).
 *
 * A compressed body cannot be searched: the provider is asked for `identity` (provider.ts), and an
 * answer compressed anyway is decoded here (Content-Encoding and Content-Length then dropped); one
 * in a coding that cannot be decoded is refused (502), never relayed unread.
 */
import { pipeline, type Readable, Transform, type TransformCallback } from 'node:stream';
import { checkDecodable, decodingStream, encodingsOf } from '../answer/decode.ts';
import { GatewayError } from '../errors.ts';
import { wholeAnswer } from './answer-handler.ts';
import type { HttpForwardResponse } from './types.ts';

/** What replaces `length` bytes of a secret: `[REDACTED***]`, or stars when shorter than the word. */
export function redactionMarker(length: number): string {
  const word = '[REDACTED]';
  return length >= word.length ? `[REDACTED${'*'.repeat(length - word.length)}]` : '*'.repeat(length);
}

interface Needle {
  text: string;
  bytes: Buffer;
  marker: Buffer;
}

export class SecretScrubber {
  private readonly needles: Needle[];
  /** The longest needle, in bytes. */
  private readonly longest: number;

  constructor(secret: string) {
    // As sent, and as a JSON encoder that escapes `/` writes it (a base64 key holds slashes).
    const forms = new Set([secret, JSON.stringify(secret).slice(1, -1), secret.replaceAll('/', '\\/')]);
    this.needles = [...forms].map((text) => {
      const bytes = Buffer.from(text, 'utf8');
      return { text, bytes, marker: Buffer.from(redactionMarker(bytes.length), 'latin1') };
    });
    this.longest = Math.max(...this.needles.map((n) => n.bytes.length));
  }

  /** One string (a header value) with every occurrence replaced. */
  string(value: string): string {
    let out = value;
    for (const n of this.needles) if (out.includes(n.text)) out = out.replaceAll(n.text, n.marker.toString('latin1'));
    return out;
  }

  headers(headers: HttpForwardResponse['headers']): HttpForwardResponse['headers'] {
    let out: HttpForwardResponse['headers'] | undefined;
    for (const name in headers) {
      const value = headers[name];
      if (value === undefined) continue;
      const scrubbed = Array.isArray(value) ? value.map((v) => this.string(v)) : this.string(value);
      const changed = Array.isArray(value) ? (scrubbed as string[]).some((v, i) => v !== value[i]) : scrubbed !== value;
      if (!changed) continue;
      out ??= { ...headers };
      out[name] = scrubbed;
    }
    return out ?? headers;
  }

  /** The answer as the client may see it: headers and (streamed) body scrubbed. */
  answer(res: HttpForwardResponse, upstream: string): HttpForwardResponse {
    let headers = this.headers(res.headers);
    const encodings = encodingsOf(headers['content-encoding']);
    // An answer that came whole is scrubbed whole (a copy: the transport's buffer stays as it was).
    if (res.whole && encodings.length === 0) {
      const whole = Buffer.from(res.whole);
      this.redact(whole);
      return wholeAnswer(res.status, headers, whole, res.timeoutMs);
    }
    let source: Readable = res.body;
    if (encodings.length > 0) {
      try {
        checkDecodable(encodings);
      } catch {
        res.body.destroy();
        throw new GatewayError(
          'upstream_error',
          `Upstream answer in content encoding "${encodings.join(', ')}" cannot be checked for the provider's key`,
          { details: { upstream } },
        );
      }
      source = decodingStream(res.body, encodings);
      const { 'content-encoding': _e, 'content-length': _l, ...rest } = headers;
      headers = rest;
    }
    const scrub = new ScrubStream(this);
    // Either side ending early ends the other: a client that leaves releases the connection.
    const body = pipeline(source, scrub, () => {});
    if (source !== res.body) scrub.once('close', () => res.body.destroy());
    // The answer's other fields (timeoutMs) go on with it; never the unscrubbed `whole`.
    return { status: res.status, headers, body, timeoutMs: res.timeoutMs };
  }

  /** Whether `buf` holds a needle. */
  holds(buf: Buffer): boolean {
    return this.needles.some((n) => buf.includes(n.bytes));
  }

  /** Overwrites every needle in `buf` (in place); true when one was found. */
  redact(buf: Buffer): boolean {
    let found = false;
    for (const n of this.needles) {
      let at = buf.indexOf(n.bytes);
      while (at !== -1) {
        found = true;
        n.marker.copy(buf, at);
        at = buf.indexOf(n.bytes, at + n.bytes.length);
      }
    }
    return found;
  }

  /** How many of `buf`'s last bytes could begin a needle (held back for the next chunk). */
  heldBack(buf: Buffer): number {
    const from = Math.max(0, buf.length - this.longest + 1);
    for (let at = from; at < buf.length; at++) {
      const rest = buf.length - at;
      for (const n of this.needles) {
        if (rest < n.bytes.length && buf.compare(n.bytes, 0, rest, at, buf.length) === 0) return rest;
      }
    }
    return 0;
  }
}

class ScrubStream extends Transform {
  private tail: Buffer = Buffer.alloc(0);

  constructor(private readonly scrubber: SecretScrubber) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let buf = this.tail.length > 0 ? Buffer.concat([this.tail, chunk]) : chunk;
    // Written into a copy: the chunk may be a view into a buffer the source reuses.
    if (buf === chunk && this.scrubber.holds(buf)) buf = Buffer.from(buf);
    this.scrubber.redact(buf);
    const keep = this.scrubber.heldBack(buf);
    this.tail = buf.subarray(buf.length - keep);
    if (buf.length > keep) this.push(buf.subarray(0, buf.length - keep));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.tail.length > 0) this.push(this.tail);
    done();
  }
}
