/**
 * A stream's decision rides on the upstream's own last text-less event (plugins/policy/stream-decision.ts):
 * nothing is added, nothing reordered, and an upstream that sends endless text-less events has
 * only its latest held (bounded memory).
 */
import { describe, expect, it } from 'vitest';
import { DecisionOnLastEvent } from '../../plugins/policy/stream-decision.ts';
import { OpenAIStreamFilter, type SseEvent, type SseVerdict } from '../../runtime/index.ts';

/** A check that lets every event through as it came. */
const passThrough = { onChunk: () => undefined, onDone: () => undefined, onEnd: () => [] };
const chunk = (o: Record<string, unknown>): SseEvent => ({
  data: JSON.stringify({ object: 'chat.completion.chunk', ...o }),
});
const text = (t: string) => chunk({ choices: [{ index: 0, delta: { content: t }, finish_reason: null }] });
const finish = chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
const usage = chunk({ choices: [], usage: { total_tokens: 3 } });
const done: SseEvent = { data: '[DONE]' };

/** Feeds `events` through the filter; returns what the client gets, and the most held at once. */
async function run(events: SseEvent[]): Promise<{ out: SseEvent[]; maxHeld: number }> {
  // Through the runtime's wire view, as the policy stage adds it (answer.filterOpenAIChunks).
  const f = new OpenAIStreamFilter(new DecisionOnLastEvent(passThrough, () => ({ action: 'allow' })));
  const out: SseEvent[] = [];
  let maxHeld = 0;
  for (const [i, e] of events.entries()) {
    const v = (await f.onEvent(e)) as SseVerdict | undefined;
    out.push(...(v === undefined ? [e] : v.events));
    maxHeld = Math.max(maxHeld, i + 1 - out.length);
  }
  out.push(...((await f.onEnd?.()) ?? []));
  return { out, maxHeld };
}
const parsed = (e: SseEvent) => (e.data === '[DONE]' ? e.data : JSON.parse(e.data));

describe('the decision on the last event', () => {
  it('on the usage chunk when the client asked for usage, in order, no event added', async () => {
    const { out } = await run([text('Hi'), finish, usage, done]);
    expect(out.map(parsed)).toEqual([
      parsed(text('Hi')),
      parsed(finish),
      { ...parsed(usage), filter_decision: { action: 'allow' } },
      '[DONE]',
    ]);
  });

  it('on the finish chunk otherwise; a text chunk after a finish releases it unchanged', async () => {
    expect((await run([text('a'), finish, done])).out.map(parsed)).toEqual([
      parsed(text('a')),
      { ...parsed(finish), filter_decision: { action: 'allow' } },
      '[DONE]',
    ]);
    expect((await run([finish, text('b'), done])).out.map(parsed)).toEqual([
      parsed(finish),
      parsed(text('b')),
      '[DONE]',
    ]);
  });

  it('nothing text-less: the events as they came', async () => {
    const events = [text('a'), text('b'), done];
    expect((await run(events)).out).toEqual(events);
  });

  it('an upstream sending 1,000 text-less events has one held at a time, every one delivered', async () => {
    const events = [...Array.from({ length: 1000 }, () => usage), done];
    const { out, maxHeld } = await run(events);
    expect(maxHeld).toBe(1);
    expect(out).toHaveLength(1001);
    expect(parsed(out[999] as SseEvent).filter_decision).toEqual({ action: 'allow' });
    expect(parsed(out[998] as SseEvent).filter_decision).toBeUndefined();
  });

  it('a stream that ends without [DONE] gets what was held, undecorated', async () => {
    const { out } = await run([text('a'), finish]);
    expect(out.map(parsed)).toEqual([parsed(text('a')), parsed(finish)]);
  });
});
