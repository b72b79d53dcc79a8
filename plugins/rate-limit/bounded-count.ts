/**
 * The bounded count of a prompt, in one place (token-count.ts has the why): the tokenizer's
 * worker (token-worker.ts) counts the start of a text with `countPrefix`, the main thread
 * completes it with `completeCount` (the rest at the counted ratio, never under one token per 3
 * UTF-8 bytes). No imports: the worker loads this file and the tokenizer, nothing else.
 */
export type CountFn = (text: string) => number;

/** The part of a gpt-tokenizer encoding module both threads use. */
export interface EncodingModule {
  countTokens(text: string, options?: { disallowedSpecial?: Set<string> }): number;
}

/**
 * The encoding's count of a text as a model reads a client's text: the spelling of a special
 * token (`<|endoftext|>`, `<|fim_prefix|>`) is ordinary text there, counted as such. (By default
 * gpt-tokenizer throws on it: a prompt or an embeddings input mentioning one would fail the
 * request on the main thread, and crash the worker, which reloads its ranks, on every such text.)
 * With no special token disallowed, the text is not searched for them either.
 */
export function ordinaryCount(mod: EncodingModule): CountFn {
  const options = { disallowedSpecial: new Set<string>() };
  return (text) => mod.countTokens(text, options);
}

/** What the tokenizer counted of a text's start: `tokens` in its first `chars` characters. */
export interface Counted {
  tokens: number;
  chars: number;
}

const bytesPerToken = 3;

/** How much of a text one `countPrefix` counts: slices of `sliceChars`, until `budgetMs` of tokenizer time is spent. */
export interface CountBounds {
  sliceChars: number;
  budgetMs: number;
}

/** The worker's bounds: 1 KiB slices, 25 ms. */
export const workerBounds: CountBounds = { sliceChars: 1024, budgetMs: 25 };

/**
 * Counts the start of `text` with `count`: slices of 1 KiB, at most `exactChars` characters and
 * 25 ms of tokenizer time (`bounds`). Synchronous: with the worker's bounds it runs in the
 * tokenizer's worker (token-worker.ts); on the event loop only with the inline bounds of
 * token-counter.ts (a short text, slices of 256 characters, well under a millisecond). `more`:
 * the text goes on past its end (it was cut to `exactChars` before being sent), so its last slice
 * is cut at a space too.
 */
export function countPrefix(
  text: string,
  count: CountFn,
  exactChars: number,
  more = false,
  bounds: CountBounds = workerBounds,
): Counted {
  const { sliceChars, budgetMs } = bounds;
  let tokens = 0;
  let at = 0;
  let spent = 0;
  const upto = Math.min(text.length, exactChars);
  while (at < upto && spent < budgetMs) {
    let end = Math.min(at + sliceChars, upto);
    if (end < text.length || more) {
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
    spent += performance.now() - started;
    at = end;
  }
  return { tokens, chars: at };
}

/** Tokens of the whole `text` from what was counted of its start (see the module comment). */
export function completeCount(text: string, counted: Counted): number {
  const { tokens, chars } = counted;
  if (chars >= text.length) return tokens;
  const rest = text.slice(chars);
  const byRatio = chars > 0 ? Math.ceil((rest.length * tokens) / chars) : 0;
  return tokens + Math.max(byRatio, estimateTokens(rest));
}

/** One token per 3 UTF-8 bytes: the estimate without a tokenizer, and the floor of the rest. */
export function estimateTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / bytesPerToken);
}
