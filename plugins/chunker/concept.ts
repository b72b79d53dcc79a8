/**
 * `llm-concept`: the model rewrites the window as a list of self-contained concepts, copying the
 * text. Its chunks are then aligned word by word with the window (align.ts): they must be
 * (near-)verbatim — at least 90% of the answer's words found in the text, in order — and cover it —
 * at least 90% of the text's words found in the answer. The chunks returned are slices of the
 * original text between the aligned boundaries, so the model's copying mistakes never reach the
 * output and no word is lost. See docs/chunking.md.
 */
import { Ajv } from 'ajv';
import { alignWords, normalizeWord } from './align.ts';
import type { LlmCaller, Piece, SplitResult, Strategy, Window } from './llm.ts';

export const MIN_PRECISION = 0.9;
export const MIN_COVERAGE = 0.9;

export function conceptSystemPrompt(size: number): string {
  return [
    'You split documents into self-contained concepts for a search index.',
    'A concept is a passage about one idea, topic or step that a reader understands on its own.',
    'Rules:',
    '- Copy the text exactly. Do not summarise, rephrase, translate, correct or add anything.',
    '- Keep the original order. Every word of the text belongs to exactly one chunk.',
    '- Split only between sentences, never inside one.',
    `- A chunk has at most ${size} words.`,
    'Answer with JSON only, in this form:',
    '{"chunks": ["<first concept, copied verbatim>", "<second concept, copied verbatim>"]}',
  ].join('\n');
}

export function conceptUserPrompt(text: string): string {
  return `Split this text into concepts:\n\n${text}`;
}

export interface ConceptAnswer {
  chunks: string[];
}

const validate = new Ajv().compile<ConceptAnswer>({
  type: 'object',
  required: ['chunks'],
  properties: {
    chunks: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
  },
});

export const conceptStrategy: Strategy = {
  type: 'llm-concept',
  async split(window: Window, size: number, llm: LlmCaller): Promise<SplitResult> {
    const answer = await llm.askJson(
      'llm-concept',
      [
        { role: 'system', content: conceptSystemPrompt(size) },
        { role: 'user', content: conceptUserPrompt(window.text) },
      ],
      validate,
    );
    if (!answer.ok) return answer;
    return piecesFromConcepts(window, answer.value.chunks);
  },
};

/** Checks the chunks against the window and turns them into pieces (exported for tests). */
export function piecesFromConcepts(window: Window, chunks: string[]): SplitResult {
  const text = window.words.map((w) => normalizeWord(window.text.slice(w.start, w.end)));
  const answer: string[] = [];
  const chunkOf: number[] = [];
  chunks.forEach((chunk, index) => {
    for (const word of chunk.match(/\S+/gu) ?? []) {
      answer.push(normalizeWord(word));
      chunkOf.push(index);
    }
  });
  // An answer far longer than the text cannot be verbatim; refusing it also bounds the alignment's cost.
  if (answer.length === 0 || answer.length > text.length * 2 + 16) return { ok: false, reason: 'not_verbatim' };
  const { matchOf, matched } = alignWords(text, answer);
  if (matched / answer.length < MIN_PRECISION) return { ok: false, reason: 'not_verbatim' };
  if (matched / text.length < MIN_COVERAGE) return { ok: false, reason: 'incomplete' };

  // A chunk starts right after the last text word matched by the chunks before it; a chunk that
  // matched nothing adds no boundary (its neighbours absorb whatever it stood for).
  const pieces: Piece[] = [{ start: 0 }];
  let lastMatched = -1;
  for (let j = 0; j < answer.length; j++) {
    if (j > 0 && chunkOf[j] !== chunkOf[j - 1] && lastMatched >= 0) {
      const start = lastMatched + 1;
      if (start > pieces[pieces.length - 1].start && start < text.length) pieces.push({ start });
    }
    if (matchOf[j] >= 0) lastMatched = matchOf[j];
  }
  return { ok: true, pieces };
}
