/**
 * Text → token id windows for a Hugging Face model: the tokenizer's own special tokens around each
 * window (learnt once from a probe, so [CLS]/[SEP], <s>/</s> or none all work), content cut to
 * `max_length`. A long text is either truncated (first window only) or split into overlapping
 * windows, up to `max_chunks`, so text past the model's limit is still seen.
 */

/** The part of @huggingface/tokenizers' Tokenizer used here (its bundled types do not resolve under NodeNext). */
export interface TextTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  token_to_id(token: string): number | undefined;
}

export interface WindowOptions {
  maxLength: number;
  longText: 'chunks' | 'truncate';
  maxChunks: number;
}

export interface EncodedText {
  windows: number[][];
  /** Content tokens of the whole text (without special tokens). */
  tokens: number;
  /** True when some of the text was not looked at. */
  truncated: boolean;
}

export class TokenWindows {
  private readonly prefix: number[];
  private readonly suffix: number[];
  private readonly budget: number;
  private readonly stride: number;

  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly options: WindowOptions,
  ) {
    // The special tokens the post-processor adds around a single sequence.
    const probe = 'probe text';
    const bare = tokenizer.encode(probe, { add_special_tokens: false }).ids;
    const full = tokenizer.encode(probe).ids;
    let start = 0;
    while (start <= full.length - bare.length && !bare.every((id, i) => full[start + i] === id)) start++;
    if (start > full.length - bare.length)
      throw new Error('tokenizer.json: cannot locate the sequence within its special tokens');
    this.prefix = full.slice(0, start);
    this.suffix = full.slice(start + bare.length);
    this.budget = options.maxLength - this.prefix.length - this.suffix.length;
    if (this.budget < 1) throw new Error(`max_length ${options.maxLength} leaves no room next to the special tokens`);
    // Windows overlap by an eighth so a phrase cut at a boundary appears whole in one of them.
    this.stride = Math.max(1, this.budget - Math.floor(this.budget / 8));
  }

  encode(text: string): EncodedText {
    const ids = this.tokenizer.encode(text, { add_special_tokens: false }).ids;
    const wrap = (content: number[]) => [...this.prefix, ...content, ...this.suffix];
    if (ids.length <= this.budget) return { windows: [wrap(ids)], tokens: ids.length, truncated: false };
    const limit = this.options.longText === 'truncate' ? 1 : this.options.maxChunks;
    const windows: number[][] = [];
    let start = 0;
    for (; windows.length < limit; start += this.stride) {
      windows.push(wrap(ids.slice(start, start + this.budget)));
      if (start + this.budget >= ids.length) break;
    }
    return { windows, tokens: ids.length, truncated: start + this.budget < ids.length };
  }
}
