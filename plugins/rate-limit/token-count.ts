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
 * `default_completion_tokens`, times the number of choices asked (`n`, `best_of`); `capped` says
 * whether the request gave its own cap (the stage caps one that did not: token-stage.ts).
 * Embeddings (`kind: 'embeddings'`): the tokens of `input` (strings counted, token-id arrays by
 * their length), and no completion.
 * Uncounted (`promptBound`): the prompt at one token per UTF-8 byte of its text, which no count
 * exceeds; the stage reserves it when the window has room for it (token-stage.ts).
 *
 * `requestTokens` reads what a body asks for (no counting); `countPrompt` counts its prompt.
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
  /** An embeddings request (`input`, nothing generated); default: chat or completions. */
  kind?: 'generation' | 'embeddings';
}

export interface Estimate {
  prompt: number;
  /** Completion tokens per choice times the choices. */
  completion: number;
  total: number;
  /** Choices generated (`n`, `best_of`), at most 128; 0 for embeddings. */
  choices: number;
  /** The request gives its own completion cap (`max_completion_tokens` or `max_tokens`), or generates nothing. */
  capped: boolean;
}

/** What a request asks for, read without counting: its text, the tokens known without a tokenizer, its completion. */
export interface RequestTokens {
  /** The text the model reads, to count ('' when none). */
  text: string;
  /** Prompt tokens known without a tokenizer: the chat format's overhead, token-id inputs. */
  fixed: number;
  /** Completion tokens per choice times the choices. */
  completion: number;
  choices: number;
  capped: boolean;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 ? v : undefined;
}

/** What a chat, completions or embeddings request body asks for (see the module comment). */
export function requestTokens(body: unknown, o: Omit<EstimateOptions, 'count' | 'exactChars'>): RequestTokens {
  const b = (typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
  if (o.kind === 'embeddings') {
    const { text, ids } = inputParts(b.input);
    return { text, fixed: ids, completion: 0, choices: 0, capped: true };
  }
  const messages = Array.isArray(b.messages) ? b.messages.length : 0;
  const asked = positiveInt(b.max_completion_tokens) ?? positiveInt(b.max_tokens);
  const perChoice = asked ?? o.defaultCompletionTokens;
  // Choices are capped (a body asking 10^6 choices is refused by the backend, not reserved for).
  const choices = Math.min(Math.max(positiveInt(b.n) ?? 1, positiveInt(b.best_of) ?? 1), 128);
  return {
    text: openaiWire.requestText(b),
    fixed: messages > 0 ? messages * 4 + 3 : 0,
    completion: perChoice * choices,
    choices,
    capped: asked !== undefined,
  };
}

/** The estimate of `asked` with its prompt at `prompt` tokens. */
export function estimateOf(asked: RequestTokens, prompt: number): Estimate {
  const { completion, choices, capped } = asked;
  return { prompt, completion, total: prompt + completion, choices, capped };
}

/** The prompt's tokens: its text counted with the tokenizer (or estimated without one), plus the fixed ones. */
export async function countPrompt(
  asked: RequestTokens,
  o: Pick<EstimateOptions, 'count' | 'exactChars'>,
): Promise<number> {
  const { text } = asked;
  const counted = text === '' ? 0 : o.count ? await o.count(text, o.exactChars) : estimateTokens(text);
  return asked.fixed + counted;
}

/**
 * At most how many tokens the prompt has, without counting: one per UTF-8 byte of its text (a
 * token is at least one byte, and the tokens of a text cover its bytes once), plus the fixed ones.
 */
export function promptBound(asked: RequestTokens): number {
  return asked.fixed + Buffer.byteLength(asked.text, 'utf8');
}

/** The reservation of a chat or completions request body, its prompt counted (see the module comment). */
export async function estimateRequest(body: unknown, o: EstimateOptions): Promise<Estimate> {
  const asked = requestTokens(body, o);
  return estimateOf(asked, await countPrompt(asked, o));
}

/**
 * The parts of an embeddings `input`: its strings (joined by newlines, counted as one text) and
 * its token ids (their number), from a string or strings, token ids, or arrays of token ids.
 * Anything else is counted from its JSON text (the backend refuses it; nothing is reserved for
 * less than it could be).
 */
function inputParts(input: unknown): { text: string; ids: number } {
  const texts: string[] = [];
  let ids = 0;
  const items = Array.isArray(input) ? input : [input];
  for (const item of items) {
    if (typeof item === 'string') texts.push(item);
    else if (typeof item === 'number') ids++;
    else if (Array.isArray(item) && item.every((t) => typeof t === 'number')) ids += item.length;
    else if (item !== undefined) texts.push(JSON.stringify(item));
  }
  return { text: texts.join('\n'), ids };
}

/**
 * The text a whole chat or completions answer generated, to count when the answer reports no
 * usage: every choice's message (content, refusal, reasoning, tool calls) or text, as the egress
 * checks read it (runtime/wire/openai.ts `answerText`), but not its log probabilities (they
 * spell the same text again).
 */
export function generatedText(answer: Record<string, unknown>): string {
  const choices = Array.isArray(answer.choices)
    ? answer.choices.map((c) =>
        typeof c === 'object' && c !== null && !Array.isArray(c) ? { ...c, logprobs: undefined } : c,
      )
    : answer.choices;
  return openaiWire.answerText({ choices });
}
