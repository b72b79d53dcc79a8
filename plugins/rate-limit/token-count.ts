/**
 * The estimate a request reserves before it goes to the backend: its prompt tokens, counted with
 * a tokenizer (`gpt-tokenizer`, an optional dependency, run in a worker thread: token-counter.ts),
 * plus the completion tokens it may use.
 *
 * Prompt: the text a model reads (runtime/wire/openai.ts `requestText`: messages, array content
 * parts, tools and functions definitions, response format schema, legacy prompt), plus 4 tokens
 * per message and 3 for the reply's start (OpenAI's chat format overhead). Images, audio and
 * files are not text and are not counted (the settle corrects it).
 * Completion: `max_completion_tokens`, else `max_tokens`, else the stage's
 * `default_completion_tokens`, times the number of choices asked (`n`, `best_of`).
 *
 * Counting is bounded (the algorithm lives here, once; the tokenizer's worker runs it): BPE on
 * hostile text is slow (measured here: about 0.1 ms per KiB of English, but 4-5 ms per KiB of
 * base64 and worse on long runs without spaces), so the text is counted in slices of at most
 * 1 KiB, cut at a space where there is one, and only the first `exactChars` characters or 25 ms
 * of tokenizer time, whichever comes first (bounded-count.ts `countPrefix`). The rest is estimated on the main
 * thread (`completeCount`): its characters at the ratio counted so far, and never fewer than one
 * token per 3 UTF-8 bytes (English is about 4 bytes a token). Without the tokenizer every text
 * is estimated at one token per 3 bytes (`estimateTokens`).
 */
import { openaiWire } from '../../runtime/index.ts';
import { estimateTokens } from './bounded-count.ts';

export type Encoding = 'o200k_base' | 'cl100k_base';
/** Counts a whole text (token-counter.ts: in the tokenizer's worker, bounded). */
export type TextCounter = (text: string, exactChars: number) => Promise<number>;

export interface EstimateOptions {
  /** The tokenizer; undefined: every prompt is estimated at one token per 3 bytes. */
  count: TextCounter | undefined;
  exactChars: number;
  defaultCompletionTokens: number;
}

export interface Estimate {
  prompt: number;
  completion: number;
  total: number;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 ? v : undefined;
}

/** The reservation of a chat or completions request body (see the module comment). */
export async function estimateRequest(body: unknown, o: EstimateOptions): Promise<Estimate> {
  const b = (typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
  const messages = Array.isArray(b.messages) ? b.messages.length : 0;
  const overhead = messages > 0 ? messages * 4 + 3 : 0;
  const text = openaiWire.requestText(b);
  const counted = text === '' ? 0 : o.count ? await o.count(text, o.exactChars) : estimateTokens(text);
  const prompt = overhead + counted;
  const perChoice = positiveInt(b.max_completion_tokens) ?? positiveInt(b.max_tokens) ?? o.defaultCompletionTokens;
  // Choices are capped (a body asking 10^6 choices is refused by the backend, not reserved for).
  const choices = Math.min(Math.max(positiveInt(b.n) ?? 1, positiveInt(b.best_of) ?? 1), 128);
  const completion = perChoice * choices;
  return { prompt, completion, total: prompt + completion };
}
