/**
 * Egress checks on a streamed answer (OpenAI-style SSE chunks), as it passes. The text of the
 * chunks goes into a sliding window of `windowChars`; every `scanEveryChars` of new text (and at
 * the end) the window is checked, so a match that spans chunks is still seen, and the cost does
 * not grow with the length of the answer. Chunks are forwarded as they come: the time to first
 * token is the backend's. When a rule blocks, the stream ends with a `content_filter` finish, an
 * error event and `[DONE]`; a redact rule masks what is still unsent of the matched spans.
 */
import type { PolicyDecision, SseEvent, SseFilter } from '../../runtime/index.ts';
import type { Span } from '../classify/api.ts';
import { chunkText } from './chat-text.ts';

export interface WindowVerdict {
  decision: PolicyDecision;
  /** Spans (offsets into the window text) a redact decision masks. */
  spans: Span[];
}

export interface StreamCheckOptions {
  windowChars: number;
  scanEveryChars: number;
  check(windowText: string): Promise<WindowVerdict>;
  /** A rule blocked or redacted: record it (decision list, audit) before the client sees the end. */
  decided(decision: PolicyDecision, scanned: { chars: number; events: number }): Promise<void>;
  /** The body of the error event that ends a blocked stream. */
  errorBody(decision: PolicyDecision): unknown;
  mask(text: string, spans: Span[]): string;
}

export function streamCheck(o: StreamCheckOptions): SseFilter {
  let window = '';
  let unscanned = 0;
  let chars = 0;
  let events = 0;
  let last: Record<string, unknown> | undefined;
  let redacted = false;

  const scan = async (current: string): Promise<{ end?: SseEvent[]; masked?: string } | undefined> => {
    unscanned = 0;
    const verdict = await o.check(window);
    const action = verdict.decision.action;
    if (action === 'deny') {
      await o.decided(verdict.decision, { chars, events });
      return { end: blockEvents(last, o.errorBody(verdict.decision)) };
    }
    if (action === 'redact' && current) {
      // Only the current chunk is still ours to change: mask the parts of spans that fall in it.
      const start = window.length - current.length;
      const inChunk = verdict.spans
        .filter((s) => s.end > start)
        .map((s) => ({ ...s, start: Math.max(0, s.start - start), end: s.end - start }));
      if (inChunk.length > 0) {
        if (!redacted) await o.decided(verdict.decision, { chars, events });
        redacted = true;
        return { masked: o.mask(current, inChunk) };
      }
    }
    return undefined;
  };

  return {
    async onEvent(event) {
      if (event.data === '' || event.data === '[DONE]') return { events: [event] };
      let chunk: unknown;
      try {
        chunk = JSON.parse(event.data);
      } catch {
        return { events: [event] };
      }
      const text = chunkText(chunk);
      if (!text) return { events: [event] };
      events++;
      chars += text.length;
      last = chunk as Record<string, unknown>;
      window = (window + text).slice(-o.windowChars);
      unscanned += text.length;
      if (unscanned < o.scanEveryChars) return { events: [event] };
      const outcome = await scan(text);
      if (outcome?.end) return { events: outcome.end, end: true };
      if (outcome?.masked !== undefined) {
        return { events: [{ ...event, data: JSON.stringify(replaceText(last, outcome.masked)) }] };
      }
      return { events: [event] };
    },
    async onEnd() {
      if (unscanned === 0) return [];
      const outcome = await scan('');
      return outcome?.end ?? [];
    },
  };
}

/** A chunk whose text is `text` (the first choice carrying text gets it, others get none). */
function replaceText(chunk: Record<string, unknown>, text: string): Record<string, unknown> {
  const choices = (chunk.choices as Array<Record<string, unknown>>).map((c) => ({ ...c }));
  let placed = false;
  for (const c of choices) {
    const delta = c.delta as Record<string, unknown> | undefined;
    if (delta && typeof delta.content === 'string') {
      c.delta = { ...delta, content: placed ? '' : text };
      placed = true;
    } else if (typeof c.text === 'string') {
      c.text = placed ? '' : text;
      placed = true;
    }
  }
  return { ...chunk, choices };
}

/** The end of a blocked stream: a `content_filter` finish, the error, and `[DONE]`. */
function blockEvents(last: Record<string, unknown> | undefined, error: unknown): SseEvent[] {
  const completions = last?.object === 'text_completion';
  const finish = {
    ...(last?.id !== undefined ? { id: last.id } : {}),
    object: last?.object ?? 'chat.completion.chunk',
    created: last?.created ?? Math.floor(Date.now() / 1000),
    ...(last?.model !== undefined ? { model: last.model } : {}),
    choices: [
      completions
        ? { index: 0, text: '', logprobs: null, finish_reason: 'content_filter' }
        : { index: 0, delta: {}, logprobs: null, finish_reason: 'content_filter' },
    ],
  };
  return [{ data: JSON.stringify(finish) }, { data: JSON.stringify(error) }, { data: '[DONE]' }];
}
