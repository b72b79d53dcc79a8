/**
 * The estimate a request reserves before it goes to the backend: its prompt tokens, counted with
 * a tokenizer (`gpt-tokenizer`, an optional dependency, loaded only when a stage asks for it),
 * plus the completion tokens it may use.
 *
 * Prompt: the text a model reads (runtime/wire/openai.ts `requestText`: messages, array content
 * parts, tools and functions definitions, response format schema, legacy prompt), plus 4 tokens
 * per message and 3 for the reply's start (OpenAI's chat format overhead). Images, audio and
 * files are not text and are not counted (the settle corrects it).
 * Completion: `max_completion_tokens`, else `max_tokens`, else the stage's
 * `default_completion_tokens`, times the number of choices asked (`n`, `best_of`).
 *
 * The event loop: BPE on hostile text is slow (measured here: about 0.1 ms per KiB of English,
 * but 4-5 ms per KiB of base64 and worse on long runs without spaces), so the text is counted in
 * slices of at most 1 KiB, cut at a space where there is one, yielding to the loop whenever
 * 5 ms passed, and only the first `exactChars` characters or 25 ms of tokenizer time, whichever
 * comes first. The rest is estimated: its characters at the ratio counted so far, and never
 * fewer than one token per 3 UTF-8 bytes (English is about 4 bytes a token). Without the
 * tokenizer every text is estimated at one token per 3 bytes (logged once at start).
 */
import type { Logger } from 'pino';
import { openaiWire } from '../../runtime/index.ts';

export type Encoding = 'o200k_base' | 'cl100k_base';
export type CountFn = (text: string) => number;

/** Loads the tokenizer's encoding; undefined (logged) when gpt-tokenizer is not installed. */
export async function loadTokenizer(encoding: Encoding, logger: Logger): Promise<CountFn | undefined> {
  try {
    const mod = (await import(`gpt-tokenizer/encoding/${encoding}`)) as { countTokens: (text: string) => number };
    return (text) => mod.countTokens(text);
  } catch (err) {
    logger.warn(
      { err: (err as Error).message, encoding },
      'token limit: gpt-tokenizer is not installed; prompts are estimated at one token per 3 bytes',
    );
    return undefined;
  }
}

const sliceChars = 1024;
const yieldEveryMs = 5;
const budgetMs = 25;
const bytesPerToken = 3;

/** Tokens of `text`: counted (bounded as the module says) when a tokenizer is given, else estimated. */
export async function countText(text: string, count: CountFn | undefined, exactChars: number): Promise<number> {
  if (text === '') return 0;
  if (!count) return estimate(text);
  let tokens = 0;
  let at = 0;
  let spent = 0;
  let sinceYield = performance.now();
  const upto = Math.min(text.length, exactChars);
  while (at < upto && spent < budgetMs) {
    let end = Math.min(at + sliceChars, upto);
    if (end < text.length) {
      // Cut after a space when there is one in the slice's second half (fewer tokens split in
      // two); searched within the slice only (lastIndexOf would scan back to the start of a
      // text without spaces, on every slice).
      for (let j = end - 1; j > at + sliceChars / 2; j--) {
        if (text.charCodeAt(j) === 0x20) {
          end = j + 1;
          break;
        }
      }
    }
    const started = performance.now();
    tokens += count(text.slice(at, end));
    const now = performance.now();
    spent += now - started;
    at = end;
    if (now - sinceYield >= yieldEveryMs && at < text.length) {
      await new Promise((resolve) => setImmediate(resolve));
      sinceYield = performance.now();
    }
  }
  if (at >= text.length) return tokens;
  const rest = text.slice(at);
  const byRatio = at > 0 ? Math.ceil((rest.length * tokens) / at) : 0;
  return tokens + Math.max(byRatio, estimate(rest));
}

function estimate(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / bytesPerToken);
}

export interface EstimateOptions {
  count: CountFn | undefined;
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
  const prompt = overhead + (await countText(openaiWire.requestText(b), o.count, o.exactChars));
  const perChoice = positiveInt(b.max_completion_tokens) ?? positiveInt(b.max_tokens) ?? o.defaultCompletionTokens;
  // Choices are capped (a body asking 10^6 choices is refused by the backend, not reserved for).
  const choices = Math.min(Math.max(positiveInt(b.n) ?? 1, positiveInt(b.best_of) ?? 1), 128);
  const completion = perChoice * choices;
  return { prompt, completion, total: prompt + completion };
}
