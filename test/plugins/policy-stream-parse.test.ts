/**
 * Counted work of a streamed egress check: the common chunk (one choice, `content` only) is read
 * from its data by the wire view (OpenAIChunk.contentOnly), and neither the check nor the stream
 * decision parses its JSON; a chunk that must be read whole (the role, the finish) is parsed once.
 * Counted with the real JSON.parse (its calls on the events' data), not timed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { redact } from '../../plugins/classify/api.ts';
import { PatternClassifier } from '../../plugins/classify/patterns/classifier.ts';
import { streamCheck } from '../../plugins/policy/stream-check.ts';
import { openaiWire, type SseEvent, type SseVerdict } from '../../runtime/index.ts';

const pii = new PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] });
const secrets = new PatternClassifier({ name: 'secrets', type: 'pattern', detectors: ['secrets'] });

function filter() {
  return streamCheck({
    windowChars: 512,
    scanEveryChars: 128,
    holdbackChars: Math.max(pii.maxSpanChars, secrets.maxSpanChars),
    openContextChars: 128,
    check(text, open, untriggered) {
      const options = { open: open === true, untriggered: untriggered === true };
      const p = pii.classifySync(text, options);
      const s = secrets.classifySync(text, options);
      if (s.score >= 0.5) return { decision: { action: 'block' }, spans: [] };
      const pendingFrom = Math.min(p.pendingFrom ?? 0, s.pendingFrom ?? 0);
      if (p.score >= 0.5) return { decision: { action: 'redact' }, spans: p.spans, pendingFrom };
      return { decision: { action: 'allow' }, spans: [], pendingFrom };
    },
    releasePoint: (text) => Math.min(pii.releasePoint(text), secrets.releasePoint(text)),
    decided() {},
    errorBody: () => ({ error: 'blocked' }),
    mask: (t, spans) => redact(t, spans),
    summary: () => ({ action: 'allow' }),
  });
}

const event = (choice: Record<string, unknown>): SseEvent => ({
  data: JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [choice] }),
});

afterEach(() => vi.restoreAllMocks());

/** The events of `text` in 4-character chunks, after a role chunk, then a finish chunk and `[DONE]`. */
function streamOf(text: string): SseEvent[] {
  return [
    event({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }),
    ...Array.from({ length: Math.ceil(text.length / 4) }, (_, i) =>
      event({ index: 0, delta: { content: text.slice(i * 4, i * 4 + 4) }, logprobs: null, finish_reason: null }),
    ),
    event({ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }),
    { data: '[DONE]' },
  ];
}

/** Feeds the events to a fresh check: what went out, and how many times an event's data was parsed. */
function run(events: SseEvent[]): { text: string; parses: number } {
  const data = new Set(events.map((e) => e.data));
  const parse = vi.spyOn(JSON, 'parse');
  const f = filter();
  const out: SseEvent[] = [];
  for (const e of events) {
    const v = f.onEvent(e) as SseVerdict | undefined;
    if (v instanceof Promise) throw new Error('a Tier A check answered with a promise');
    out.push(...(v === undefined ? [e] : v.events));
  }
  const parses = parse.mock.calls.filter(([arg]) => data.has(arg as string)).length;
  parse.mockRestore();
  const text = out
    .filter((e) => e.data !== '[DONE]')
    .map((e) => openaiWire.chunkText(JSON.parse(e.data)))
    .join('');
  return { text, parses };
}

describe('streamed egress check: counted parses', () => {
  it('parses no content-only chunk of clean text (cut or not), and the role and finish chunks once each', () => {
    const text = 'The quick brown fox jumps over the lazy dog, 42 times: call it a day. '.repeat(20);
    const events = streamOf(text);
    const { text: received, parses } = run(events);
    expect(events.length).toBeGreaterThan(300);
    expect(parses).toBe(2);
    expect(received).toBe(text);
  });

  it('masks what a parse of the chunks would find (chunks touched by an address are parsed to be masked)', () => {
    const text = 'The quick brown fox jumps over the lazy dog. Write to ops@example.org today. '.repeat(10);
    const { text: received } = run(streamOf(text));
    expect(received).toBe(text.replaceAll('ops@example.org', '[EMAIL]'));
  });
});
