/**
 * The wire view of an OpenAI-style event stream (`chat.completion.chunk` events, then
 * `data: [DONE]`): a stage reads parsed chunks, their text and the end, and never the framing.
 * The runtime parses each event once (the parse is shared by every stage that reads the stream:
 * an event passed on unchanged is the same object), knows `[DONE]` from a chunk, and decides what
 * an event that is not a JSON object means for the stage:
 *
 * - `invalid: 'refuse'` (default): an UninspectableAnswer `invalid_event`, so the stage's
 *   `on_uninspectable` decides, as for any answer it cannot read;
 * - `invalid: 'skip'`: the event passes unread (an observer that counts what it can read and
 *   checks nothing, e.g. token usage).
 *
 * Add a reader with `answer.filterOpenAIChunks(reader)`; it runs as any stream filter does (in the
 * order of the stages, under its stage's `on_uninspectable`, at once unless it returns a promise).
 */
import type { Readable } from 'node:stream';
import type { SseEvent, SseFilter, SseVerdict } from '../answer/event-stream.ts';
import { UninspectableAnswer } from '../answer/uninspectable.ts';
import { sseData } from '../upstreams/sse.ts';
import { chunkText } from './openai.ts';

/** One streamed chunk, parsed. */
export class OpenAIChunk {
  #text: string | undefined;
  #json: Readonly<Record<string, unknown>> | undefined;
  /**
   * True when the chunk is known (read from its data, the JSON not parsed yet) to be the common
   * one: one choice whose delta has only `content`, unfinished (`finish_reason` null or absent,
   * `logprobs` null or absent), no `error`, and nothing but numbers, strings, booleans and nulls
   * besides `choices` (PLAIN_CHUNK). Then `text` is that content, and no other field of the chunk
   * is text; false says nothing.
   */
  readonly contentOnly: boolean;

  constructor(
    /** The event as it came (return it in `{ events: [chunk.event] }` to pass it byte for byte). */
    readonly event: SseEvent,
    /** The chunk's JSON object; undefined: parsed from `event.data` when first read (`text` given). */
    json: Readonly<Record<string, unknown>> | undefined,
    text?: string,
  ) {
    this.#json = json;
    this.#text = text;
    this.contentOnly = json === undefined;
  }

  /** The chunk's JSON object (shared with the other readers of the stream: copy before changing). */
  get json(): Readonly<Record<string, unknown>> {
    this.#json ??= JSON.parse(this.event.data) as Record<string, unknown>;
    return this.#json;
  }

  /** Every text field a client reads in the chunk, concatenated (openaiWire.chunkText). */
  get text(): string {
    this.#text ??= chunkText(this.json);
    return this.#text;
  }

  /** The chunk's `usage`, when it carries one (the usage chunk of a stream asked for it). */
  get usage(): Readonly<Record<string, unknown>> | undefined {
    // A content-only chunk's other fields are not objects.
    if (this.contentOnly) return undefined;
    const usage = this.json.usage;
    return typeof usage === 'object' && usage !== null && !Array.isArray(usage)
      ? (usage as Record<string, unknown>)
      : undefined;
  }
}

/** A JSON string's body without escapes or control characters (JSON.parse takes it as it is). */
const RAW = '[^"\\\\\\x00-\\x1f]*';
/** A JSON scalar: a string without escapes, a number (JSON's grammar), true, false or null. */
const SCALAR = `(?:"${RAW}"|-?(?:0|[1-9]\\d*)(?:\\.\\d+)?(?:[eE][+-]?\\d+)?|true|false|null)`;
/** A member that is not `choices` or `error` (what holds a chunk's text), with a scalar value. */
const MEMBER = `"(?!choices"|error")${RAW}":${SCALAR}`;
/**
 * The common streamed chunk, written without blanks as OpenAI-compatible backends write it, e.g.
 * `{"id":"…","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,
 * "delta":{"content":"…"},"logprobs":null,"finish_reason":null}]}`: its content (group 1, a JSON
 * string's body) read without parsing the event. Valid JSON whenever it matches, and the parse
 * would give one choice, that delta and no other text (OpenAIChunk.contentOnly). Linear: every
 * repetition starts with a character the one before cannot take. Anything else is parsed.
 */
/** Events longer than this are parsed: for them JSON.parse is faster than PLAIN_CHUNK. */
const plainChunkChars = 64 * 1024;

const PLAIN_CHUNK = new RegExp(
  `^\\{(?:${MEMBER},)*"choices":\\[\\{"index":0,"delta":\\{"content":"((?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*)"\\}(?:,"logprobs":null)?(?:,"finish_reason":null)?\\}\\](?:,${MEMBER})*\\}$`,
);

export type ChunkVerdict = SseVerdict | undefined | Promise<SseVerdict | undefined>;

export interface OpenAIStreamReader {
  /** A chunk: `undefined` passes it on as it came (the cheapest answer), else the events in its place. */
  onChunk?(chunk: OpenAIChunk): ChunkVerdict;
  /** `data: [DONE]` arrived (clients stop reading there: what is left to say is said now). */
  onDone?(event: SseEvent): ChunkVerdict;
  /** The upstream ended its stream: events to append (may throw UninspectableAnswer). */
  onEnd?(): SseEvent[] | Promise<SseEvent[]>;
  /** How to end the stream when the stage refuses it (an error event); without it the connection is cut. */
  refuse?(err: UninspectableAnswer): SseEvent[];
}

export interface OpenAIStreamOptions {
  /** What an event that is not a JSON object is: `refuse` (UninspectableAnswer) or `skip` (passed unread). */
  invalid?: 'refuse' | 'skip';
}

/**
 * Lets a class add private fields to an object it did not make (a class's constructor returning
 * another object: the subclass's fields are installed on that one).
 */
class Stamped {
  constructor(o: object) {
    // biome-ignore lint/correctness/noConstructorReturn: the way to install private fields on `o`
    return o;
  }
}

/**
 * Parsed events, shared by every reader of the stream (an event passed on unchanged is the same
 * object): the parse is kept on the event itself, in a private field. Not a WeakMap: an entry per
 * event of every stream costs the garbage collector more than the field does, and a field is
 * invisible to everything else (not copied by a spread, not in JSON, not an own key): a copy of
 * an event with other data is parsed anew.
 */
class ParsedEvent extends Stamped {
  #chunk: OpenAIChunk | null = null;

  /** The parse kept on `event`, or undefined when it was never parsed. */
  static of(event: SseEvent): OpenAIChunk | null | undefined {
    return #chunk in event ? (event as unknown as ParsedEvent).#chunk : undefined;
  }

  static keep(event: SseEvent, chunk: OpenAIChunk | null): void {
    (new ParsedEvent(event) as ParsedEvent).#chunk = chunk;
  }
}

/** The chunk an event carries, parsed once; null when it is not a JSON object. */
export function chunkOf(event: SseEvent): OpenAIChunk | null {
  let chunk = ParsedEvent.of(event);
  if (chunk !== undefined) return chunk;
  chunk = null;
  const data = event.data;
  // The common chunk: its content read without parsing (the JSON is parsed if a reader asks for it).
  // Not a long one: the expression reads ~10x slower than JSON.parse (a 4 MB delta: ~30 ms).
  const plain = data.length <= plainChunkChars && data.charCodeAt(1) === 0x22 /* " */ ? PLAIN_CHUNK.exec(data) : null;
  if (plain !== null) {
    const body = plain[1] as string;
    chunk = new OpenAIChunk(event, undefined, body.indexOf('\\') === -1 ? body : (JSON.parse(`"${body}"`) as string));
  } else if (data.charCodeAt(0) === 0x7b /* { */ || data.trimStart().startsWith('{')) {
    try {
      const json: unknown = JSON.parse(data);
      if (typeof json === 'object' && json !== null && !Array.isArray(json)) {
        chunk = new OpenAIChunk(event, json as Record<string, unknown>);
      }
    } catch {
      // not JSON: null
    }
  }
  ParsedEvent.keep(event, chunk);
  return chunk;
}

/** The SseFilter that runs a reader (made per streamed answer). */
export class OpenAIStreamFilter implements SseFilter {
  readonly #skipInvalid: boolean;
  constructor(
    private readonly reader: OpenAIStreamReader,
    options: OpenAIStreamOptions = {},
  ) {
    this.#skipInvalid = options.invalid === 'skip';
    if (reader.onEnd) this.onEnd = reader.onEnd.bind(reader);
    if (reader.refuse) this.refuse = reader.refuse.bind(reader);
  }

  onEnd?: () => SseEvent[] | Promise<SseEvent[]>;
  refuse?: (err: UninspectableAnswer) => SseEvent[];

  onEvent(event: SseEvent): ChunkVerdict {
    if (event.data === '[DONE]') return this.reader.onDone?.(event);
    const chunk = chunkOf(event);
    if (chunk) return this.reader.onChunk?.(chunk);
    if (this.#skipInvalid) return undefined;
    throw new UninspectableAnswer('invalid_event', 'an event of the stream is not a JSON object');
  }
}

/**
 * The text of a stream carried across chunk boundaries, up to a bound: what a stage looking for a
 * pattern in streamed text reads instead of assembling the chunks itself (an address, a word, a
 * secret may be cut anywhere between two chunks). Made per streamed answer, fed each chunk's text.
 *
 * `matches(pattern, text)` returns each complete match once: `text` is read after what is held
 * from the chunks before; a match that reaches the end of what arrived may still grow, so it waits
 * for the next text (or `end`). After the last match returned, at most `bound` characters are
 * held: make it longer than anything the pattern can match (e.g. 320 for an e-mail address).
 * Patterns are global (`/…/g`) and greedy (a match ending before the end of the text is whole).
 */
export class TextWindow {
  #held = '';

  constructor(readonly bound: number) {
    if (!Number.isInteger(bound) || bound < 1) throw new RangeError(`a text window's bound must be a positive integer`);
  }

  /** What is carried to the next text (at most `bound` characters). */
  get held(): string {
    return this.#held;
  }

  /** The complete matches of `pattern` in the held text and `text`; indexes are in `held + text`. */
  matches(pattern: RegExp, text: string): RegExpExecArray[] {
    const window = this.#held + text;
    const found: RegExpExecArray[] = [];
    let done = 0;
    for (const m of window.matchAll(global(pattern))) {
      const end = m.index + m[0].length;
      if (end === window.length) break; // it may go on in the next text
      found.push(m as RegExpExecArray);
      done = end;
    }
    this.#held = window.slice(Math.max(done, window.length - this.bound));
    return found;
  }

  /** The stream ended (at `[DONE]`, or without it): the matches of what is held, then nothing is. */
  end(pattern: RegExp): RegExpExecArray[] {
    const held = this.#held;
    this.#held = '';
    return [...held.matchAll(global(pattern))] as RegExpExecArray[];
  }
}

function global(pattern: RegExp): RegExp {
  if (!pattern.global) throw new TypeError(`a text window's pattern must be global (/…/g): ${pattern}`);
  return pattern;
}

/**
 * The data of each event of an OpenAI-style stream a stage reads from a call of its own (not the
 * request's answer, which `filterOpenAIChunks` reads), up to `data: [DONE]` (left out): the
 * framing and the end are the runtime's.
 */
export async function* openaiStreamData(body: Readable): AsyncGenerator<string> {
  for await (const data of sseData(body)) {
    if (data === '[DONE]') return;
    yield data;
  }
}
