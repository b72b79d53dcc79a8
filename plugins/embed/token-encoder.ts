/**
 * Text → token ids for one model: the input-type prefix (E5's `passage: `, Nomic's
 * `search_document: `...), the tokenizer.json's own special tokens around the text (learnt once
 * from a probe, so [CLS]/[SEP], <s>/</s> or none all work), content truncated to the model's
 * token limit as Hugging Face tokenizers truncate a single sequence.
 *
 * A very long text is not tokenised whole: only the tokens that fit matter, so a growing prefix
 * of the text, cut at whitespace, is tokenised until it yields more tokens than fit. Words left
 * of the cut tokenise the same either way, so the result equals truncating the whole text.
 */
import type { InputType, ModelCard } from './api.ts';

/** The part of @huggingface/tokenizers' Tokenizer used here (its bundled types do not resolve under NodeNext). */
export interface TextTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  token_to_id(token: string): number | undefined;
}

/** Characters tried first per token of budget; doubled until enough tokens come out. */
const CHARS_PER_TOKEN_GUESS = 8;

export class TokenEncoder {
  private readonly prefixIds: number[];
  private readonly suffixIds: number[];
  /** Content tokens that fit between the special tokens. */
  readonly budget: number;

  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly card: Pick<ModelCard, 'prefixes'>,
    readonly maxLength: number,
  ) {
    const probe = 'probe text';
    const bare = tokenizer.encode(probe, { add_special_tokens: false }).ids;
    const full = tokenizer.encode(probe).ids;
    let start = 0;
    while (start <= full.length - bare.length && !bare.every((id, i) => full[start + i] === id)) start++;
    if (start > full.length - bare.length) {
      throw new Error('tokenizer.json: cannot locate the sequence within its special tokens');
    }
    this.prefixIds = full.slice(0, start);
    this.suffixIds = full.slice(start + bare.length);
    this.budget = maxLength - this.prefixIds.length - this.suffixIds.length;
    if (this.budget < 1) throw new Error(`max_length ${maxLength} leaves no room next to the special tokens`);
  }

  /** The text as the model sees it: with the input type's prefix, unless the text already starts with one of the model's prefixes. */
  withPrefix(text: string, inputType: InputType): string {
    const { query, passage } = this.card.prefixes;
    const prefix = inputType === 'query' ? query : passage;
    if (!prefix) return text;
    if ((query && text.startsWith(query)) || (passage && text.startsWith(passage))) return text;
    return prefix + text;
  }

  /** Token ids with special tokens, at most maxLength of them. */
  encode(text: string, inputType: InputType = 'passage'): number[] {
    const content = this.contentIds(this.withPrefix(text, inputType));
    return [...this.prefixIds, ...content, ...this.suffixIds];
  }

  private contentIds(text: string): number[] {
    let chars = this.budget * CHARS_PER_TOKEN_GUESS;
    while (chars < text.length) {
      const cut = lastWhitespaceBefore(text, chars);
      if (cut > 0) {
        const ids = this.tokenizer.encode(text.slice(0, cut), { add_special_tokens: false }).ids;
        if (ids.length > this.budget) return ids.slice(0, this.budget);
      }
      chars *= 2;
    }
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids.slice(0, this.budget);
  }
}

/** Index of the last whitespace character at or before `end` (0 when there is none). */
function lastWhitespaceBefore(text: string, end: number): number {
  for (let i = Math.min(end, text.length - 1); i > 0; i--) {
    const c = text.charCodeAt(i);
    if (c === 32 || c === 10 || c === 9 || c === 13) return i;
  }
  return 0;
}
