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
import type { SseEvent, SseFilter, SseVerdict } from '../answer/event-stream.ts';
import { UninspectableAnswer } from '../answer/uninspectable.ts';
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
