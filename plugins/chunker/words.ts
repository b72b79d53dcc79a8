/**
 * Words: maximal runs of non-whitespace characters (JavaScript's `\s`, which includes Unicode
 * spaces). A chunk of words is the exact slice of the text from its first word's first character
 * to its last word's last character: whitespace inside a chunk is kept as it was, whitespace
 * between chunks and around the text is not part of any chunk.
 */
export interface Span {
  start: number;
  end: number;
}

export function wordSpans(text: string): Span[] {
  const spans: Span[] = [];
  for (const match of text.matchAll(/\S+/gu)) spans.push({ start: match.index, end: match.index + match[0].length });
  return spans;
}

/** The text of words `from` (inclusive) to `to` (exclusive). */
export function sliceWords(text: string, words: Span[], from: number, to: number): string {
  return text.slice(words[from].start, words[to - 1].end);
}

/** Words `from`..`to` in chunks of `size` words; only the last may be shorter. */
export function wordChunks(text: string, words: Span[], from: number, to: number, size: number): string[] {
  const chunks: string[] = [];
  for (let at = from; at < to; at += size) chunks.push(sliceWords(text, words, at, Math.min(at + size, to)));
  return chunks;
}

/** The `words` chunking type. */
export function chunkWords(text: string, size: number): string[] {
  const words = wordSpans(text);
  return wordChunks(text, words, 0, words.length, size);
}
