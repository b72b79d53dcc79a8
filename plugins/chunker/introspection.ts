/**
 * `llm-introspection`: the window is shown to the model as numbered sentences; after reading all
 * of it (it first states what the text covers) the model proposes where each section starts, as
 * sentence numbers, with a short title per section. The split points are checked (integers,
 * first 0, strictly increasing, each a sentence of the window); the chunks are the original text
 * between them. See docs/chunking.md.
 */
import { Ajv } from 'ajv';
import type { LlmCaller, Piece, SplitResult, Strategy, Window } from './llm.ts';

export const MAX_TITLE_CHARS = 120;

export function introspectionSystemPrompt(size: number): string {
  return [
    'You divide documents into sections for a search index.',
    'The text is given as numbered sentences, one per line: "[n] sentence".',
    'First read the whole text and state in one sentence what it covers.',
    'Then decide where each section begins.',
    'A section is a run of consecutive sentences about one topic that a reader understands on its own.',
    'Rules:',
    '- The first section starts at sentence 0.',
    '- Section starts are sentence numbers of the text, in increasing order.',
    `- A section has at most ${size} words.`,
    '- Give each section a short title (at most 8 words) saying what it is about.',
    'Answer with JSON only, in this form:',
    '{"summary": "<what the text covers>", "chunks": [{"start": 0, "title": "<title>"}, {"start": 7, "title": "<title>"}]}',
  ].join('\n');
}

export function introspectionUserPrompt(sentences: string[]): string {
  return sentences.map((sentence, n) => `[${n}] ${sentence.replace(/\s+/gu, ' ')}`).join('\n');
}

export interface IntrospectionAnswer {
  summary?: string;
  chunks: Array<{ start: number; title: string }>;
}

const validate = new Ajv().compile<IntrospectionAnswer>({
  type: 'object',
  required: ['chunks'],
  properties: {
    summary: { type: 'string' },
    chunks: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['start', 'title'],
        properties: {
          start: { type: 'integer', minimum: 0 },
          title: { type: 'string', minLength: 1, maxLength: MAX_TITLE_CHARS },
        },
      },
    },
  },
});

const segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });

/** The window's sentences as word indices where each starts (a sentence starts at a word). */
export function sentenceStarts(window: Window): number[] {
  const starts: number[] = [];
  let word = 0;
  for (const { index } of segmenter.segment(window.text)) {
    while (word < window.words.length && window.words[word].end <= index) word++;
    if (word >= window.words.length) break;
    // A boundary inside a word ("end.Next") counts from that word.
    if (starts.length === 0 || word > starts[starts.length - 1]) starts.push(word);
  }
  return starts;
}

export const introspectionStrategy: Strategy = {
  type: 'llm-introspection',
  async split(window: Window, size: number, llm: LlmCaller): Promise<SplitResult> {
    const starts = sentenceStarts(window);
    // One sentence has nothing to split: no need to ask.
    if (starts.length <= 1) return { ok: true, pieces: [{ start: 0 }] };
    const sentences = starts.map((start, n) => {
      const end = n + 1 < starts.length ? starts[n + 1] : window.words.length;
      return window.text.slice(window.words[start].start, window.words[end - 1].end);
    });
    const answer = await llm.askJson(
      'llm-introspection',
      [
        { role: 'system', content: introspectionSystemPrompt(size) },
        { role: 'user', content: introspectionUserPrompt(sentences) },
      ],
      validate,
    );
    if (!answer.ok) return answer;
    return piecesFromSplitPoints(starts, answer.value.chunks);
  },
};

/** Checks the split points and turns them into pieces (exported for tests). */
export function piecesFromSplitPoints(starts: number[], chunks: IntrospectionAnswer['chunks']): SplitResult {
  const pieces: Piece[] = [];
  for (const [n, { start, title }] of chunks.entries()) {
    const valid = start < starts.length && (n === 0 ? start === 0 : start > chunks[n - 1].start);
    if (!valid) return { ok: false, reason: 'invalid_split_points' };
    pieces.push({ start: starts[start], title: title.trim() });
  }
  return { ok: true, pieces };
}
