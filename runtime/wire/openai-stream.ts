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
  constructor(
    /** The event as it came (return it in `{ events: [chunk.event] }` to pass it byte for byte). */
    readonly event: SseEvent,
    /** The chunk's JSON object (shared with the other readers of the stream: copy before changing). */
    readonly json: Readonly<Record<string, unknown>>,
  ) {}

  /** Every text field a client reads in the chunk, concatenated (openaiWire.chunkText). */
  get text(): string {
    this.#text ??= chunkText(this.json);
    return this.#text;
  }

  /** The chunk's `usage`, when it carries one (the usage chunk of a stream asked for it). */
  get usage(): Readonly<Record<string, unknown>> | undefined {
    const usage = this.json.usage;
    return typeof usage === 'object' && usage !== null && !Array.isArray(usage)
      ? (usage as Record<string, unknown>)
      : undefined;
  }
}

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

/** Parsed events, shared by every reader of the stream (an event passed on unchanged is the same object). */
const parsed = new WeakMap<SseEvent, OpenAIChunk | null>();

/** The chunk an event carries, parsed once; null when it is not a JSON object. */
export function chunkOf(event: SseEvent): OpenAIChunk | null {
  let chunk = parsed.get(event);
  if (chunk !== undefined) return chunk;
  chunk = null;
  const data = event.data;
  // Cheap first look: a chunk is an object.
  if (data.charCodeAt(0) === 0x7b /* { */ || data.trimStart().startsWith('{')) {
    try {
      const json: unknown = JSON.parse(data);
      if (typeof json === 'object' && json !== null && !Array.isArray(json)) {
        chunk = new OpenAIChunk(event, json as Record<string, unknown>);
      }
    } catch {
      // not JSON: null
    }
  }
  parsed.set(event, chunk);
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
