/**
 * What the two LLM chunking types share: asking the model for JSON and checking it, cutting long
 * texts into windows, and falling back to `words` for a window whose answer is unusable.
 *
 * Windows: the text is cut into windows of at most `windowWords` words. A strategy splits one
 * window into pieces (word indices where a chunk starts). Every piece but the last is emitted;
 * the last one is carried into the next window, because the window edge may have cut it short
 * (the final window emits everything). A window whose answer is unusable is chunked by words
 * instead: counted in `switchyard_chunk_fallbacks_total` and logged without the text.
 */
import type { ValidateFunction } from 'ajv';
import type { AIService, ChatMessage } from '../../lib/ai-client/index.ts';
import { AIClientError, AITimeoutError } from '../../lib/ai-client/index.ts';
import { GatewayError } from '../../runtime/index.ts';
import { type Span, sliceWords, wordChunks, wordSpans } from './words.ts';

export type FallbackReason =
  | 'llm_error'
  | 'llm_timeout'
  | 'truncated'
  | 'invalid_json'
  | 'schema'
  | 'not_verbatim'
  | 'incomplete'
  | 'invalid_split_points'
  | 'too_long';

/** A window of the text: its text and its words (offsets relative to the window). */
export interface Window {
  text: string;
  words: Span[];
}

/** Where a chunk starts (a word index of the window) and, for introspection, its title. */
export interface Piece {
  start: number;
  title?: string;
}

export type SplitResult = { ok: true; pieces: Piece[] } | { ok: false; reason: FallbackReason };

export interface Strategy {
  type: string;
  split(window: Window, size: number, llm: LlmCaller): Promise<SplitResult>;
}

export interface LlmSettings {
  windowWords: number;
  maxWindows: number;
  includeTitles: boolean;
}

export interface ChunkHooks {
  /** Called once per window that fell back to words. */
  onFallback(type: string, reason: FallbackReason, window: { words: number; chars: number }): void;
  onLlmCall(type: string, outcome: 'ok' | 'unusable' | 'failed', seconds: number): void;
}

export type JsonAnswer<T> = { ok: true; value: T } | { ok: false; reason: FallbackReason };

/** Asks the model and checks its answer; failures of the call itself become fallbacks or GatewayErrors. */
export class LlmCaller {
  constructor(
    readonly ai: AIService,
    readonly options: { fallbackOnError: boolean; timeoutMs: number; jsonMode: boolean },
    readonly hooks: ChunkHooks,
  ) {}

  async askJson<T>(type: string, messages: ChatMessage[], validate: ValidateFunction<T>): Promise<JsonAnswer<T>> {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    let content: string;
    let finishReason: string | null;
    try {
      const answer = await this.ai.chat(messages, {
        timeoutMs: this.options.timeoutMs,
        responseFormat: this.options.jsonMode ? 'json_object' : undefined,
      });
      content = answer.content;
      finishReason = answer.finishReason;
    } catch (err) {
      if (!(err instanceof AIClientError)) throw err;
      this.hooks.onLlmCall(type, 'failed', seconds());
      if (this.options.fallbackOnError)
        return { ok: false, reason: err instanceof AITimeoutError ? 'llm_timeout' : 'llm_error' };
      throw err instanceof AITimeoutError
        ? new GatewayError('upstream_timeout', 'The chunking model did not answer in time', { cause: err })
        : new GatewayError('upstream_error', 'The chunking model request failed', {
            details: { reason: err.kind },
            cause: err,
          });
    }
    const parsed = parseJsonAnswer(content);
    let result: JsonAnswer<T>;
    if (parsed === undefined) result = { ok: false, reason: finishReason === 'length' ? 'truncated' : 'invalid_json' };
    else if (!validate(parsed)) result = { ok: false, reason: 'schema' };
    else result = { ok: true, value: parsed };
    this.hooks.onLlmCall(type, result.ok ? 'ok' : 'unusable', seconds());
    return result;
  }
}

/**
 * The JSON value of an answer: the whole text, else inside a ```json fence, else from the first
 * `{` to the last `}` (models like to add a sentence around it). Undefined when none parses.
 */
export function parseJsonAnswer(content: string): unknown {
  const candidates = [content.trim()];
  const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(content);
  if (fenced) candidates.push(fenced[1].trim());
  const first = content.indexOf('{');
  const last = content.lastIndexOf('}');
  if (first >= 0 && last > first) candidates.push(content.slice(first, last + 1));
  for (const candidate of candidates) {
    try {
      return JSON.parse(candidate);
    } catch {
      // try the next form
    }
  }
  return undefined;
}

/** Chunks a whole text with an LLM strategy, window by window. */
export async function chunkWithLlm(
  text: string,
  size: number,
  strategy: Strategy,
  llm: LlmCaller,
  settings: LlmSettings,
): Promise<string[]> {
  const words = wordSpans(text);
  const chunks: string[] = [];
  let position = 0;
  let windows = 0;
  while (position < words.length) {
    if (windows >= settings.maxWindows) {
      const rest = { words: words.length - position, chars: words[words.length - 1].end - words[position].start };
      llm.hooks.onFallback(strategy.type, 'too_long', rest);
      chunks.push(...wordChunks(text, words, position, words.length, size));
      break;
    }
    const end = Math.min(position + settings.windowWords, words.length);
    const isLast = end === words.length;
    const window = windowOf(text, words, position, end);
    windows++;
    const result = await strategy.split(window, size, llm);
    if (!result.ok) {
      llm.hooks.onFallback(strategy.type, result.reason, { words: end - position, chars: window.text.length });
      chunks.push(...wordChunks(text, words, position, end, size));
      position = end;
      continue;
    }
    const pieces = result.pieces;
    // Carry the last piece over unless this is the last window (or it is the only piece: progress).
    const emitted = !isLast && pieces.length > 1 ? pieces.length - 1 : pieces.length;
    for (let p = 0; p < emitted; p++) {
      const from = position + pieces[p].start;
      const to = p + 1 < pieces.length ? position + pieces[p + 1].start : end;
      for (const chunk of wordChunks(text, words, from, to, size)) {
        chunks.push(settings.includeTitles && pieces[p].title ? `${pieces[p].title}\n\n${chunk}` : chunk);
      }
    }
    position = emitted < pieces.length ? position + pieces[emitted].start : end;
  }
  return chunks;
}

function windowOf(text: string, words: Span[], from: number, to: number): Window {
  const offset = words[from].start;
  return {
    text: sliceWords(text, words, from, to),
    words: words.slice(from, to).map((w) => ({ start: w.start - offset, end: w.end - offset })),
  };
}
