/**
 * Aligns the words of a model's answer with the words of the text it was given, to check that the
 * answer's chunks are (near-)verbatim pieces of the text in order, and to find where each chunk
 * starts in the text. Words are compared normalised (Unicode NFKC, lower case, without the
 * punctuation around them), so a changed quote mark or a dropped comma still matches.
 * The alignment is a longest common subsequence: O(n·m) time and memory, which is why the
 * caller bounds both sides (the window and the answer length).
 */
export function normalizeWord(word: string): string {
  const bare = word
    .normalize('NFKC')
    .toLowerCase()
    .replace(/^[\p{P}\p{S}]+|[\p{P}\p{S}]+$/gu, '');
  return bare === '' ? word.normalize('NFKC').toLowerCase() : bare;
}

export interface Alignment {
  /** For each answer word, the index of the text word it matched, or -1. */
  matchOf: Int32Array;
  /** Number of matched pairs. */
  matched: number;
}

/** Longest common subsequence of two word lists (already normalised). */
export function alignWords(text: string[], answer: string[]): Alignment {
  const n = text.length;
  const m = answer.length;
  const width = m + 1;
  // lengths[i*width + j] = LCS of text[i..] and answer[j..]; filled backwards so the walk goes forwards.
  const lengths = n < 65_535 && m < 65_535 ? new Uint16Array((n + 1) * width) : new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i * width + j] =
        text[i] === answer[j]
          ? lengths[(i + 1) * width + j + 1] + 1
          : Math.max(lengths[(i + 1) * width + j], lengths[i * width + j + 1]);
    }
  }
  const matchOf = new Int32Array(m).fill(-1);
  let matched = 0;
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (text[i] === answer[j]) {
      matchOf[j] = i;
      matched++;
      i++;
      j++;
    } else if (lengths[(i + 1) * width + j] >= lengths[i * width + j + 1]) i++;
    else j++;
  }
  return { matchOf, matched };
}
