/**
 * The SSE framing (runtime/answer/event-framer.ts) both event-stream readers use: the events of a
 * text whatever its chunking, in linear time. A reader that searched its whole buffer again at
 * every chunk read a 4 MB event's start 60 times (quadratic): counted here, not timed.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVENT_END, EventFramer, type FramedEvent } from '../../runtime/answer/event-framer.ts';
import { cut } from '../helpers/cut-text.ts';

/** The events of a whole text, cut the plain way (what any chunking must give). */
function reference(text: string): { events: Array<{ text: string; separator: string }>; rest: string } {
  const events: Array<{ text: string; separator: string }> = [];
  let rest = text;
  for (let m = EVENT_END.exec(rest); m; m = EVENT_END.exec(rest)) {
    events.push({ text: rest.slice(0, m.index), separator: m[0] });
    rest = rest.slice(m.index + m[0].length);
  }
  return { events, rest };
}

function framed(chunks: string[]) {
  const framer = new EventFramer();
  const events: FramedEvent[] = [];
  for (const c of chunks) framer.push(c, events);
  return { events, rest: framer.rest(), searched: framer.searchedChars };
}

describe('SSE event framing', () => {
  it('property: any text in any chunks gives the events of the whole text, separators included', () => {
    const piece = fc.constantFrom('data: x', '\n', '\r', '\r\n', 'event: a', ':', ' ', 'é', '😀', 'data: {"a":1}');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), fc.array(fc.nat(), { maxLength: 10 }), (pieces, cuts) => {
        const text = pieces.join('');
        expect(framed(cut(text, cuts))).toMatchObject(reference(text));
      }),
      { numRuns: 500 },
    );
  });

  it('reads each character a bounded number of times, however long the event and small the chunks', () => {
    const event = `data: {"choices":[{"delta":{"content":"${'word '.repeat(200_000)}"}}]}`;
    const chunks: string[] = [];
    for (let i = 0; i < event.length; i += 1024) chunks.push(event.slice(i, i + 1024));
    chunks.push('\n\n', 'data: [DONE]\n\n');
    const { events, searched } = framed(chunks);
    expect(events.map((e) => e.text)).toEqual([event, 'data: [DONE]']);
    // Each chunk once with three characters before it, the pending text once more when the event
    // ends: ~2 reads a character. Searching the buffer again per chunk: ~500 reads a character.
    expect(searched).toBeLessThan(3 * event.length);
    // Many small events in one chunk: each read up to its end, not the chunk's.
    const many = 'data: x\n\n'.repeat(10_000);
    const small = framed([many]);
    expect(small.events).toHaveLength(10_000);
    expect(small.searched).toBeLessThan(3 * many.length);
  });

  it('the pending length is what a reader bounds (an event that never ends)', () => {
    const framer = new EventFramer();
    framer.push('data: ', []);
    framer.push('x'.repeat(1000), []);
    expect(framer.pendingLength).toBe(1006);
    const events: FramedEvent[] = [];
    framer.push('\n\ndata: y', events);
    expect(events).toEqual([{ text: `data: ${'x'.repeat(1000)}`, separator: '\n\n' }]);
    expect(framer.pendingLength).toBe(7);
  });
});

describe('sseData (the gateway reading an upstream event stream)', () => {
  it('yields each event as it completes, and fails on an event longer than its bound', async () => {
    const { Readable } = await import('node:stream');
    const { sseData } = await import('../../runtime/upstreams/sse.ts');
    const ok = Readable.from(['data: a\n', '\ndata: b\n\n', ': comment\n\n', 'data: c'].map((t) => Buffer.from(t)));
    const got: string[] = [];
    for await (const d of sseData(ok)) got.push(d);
    expect(got).toEqual(['a', 'b', 'c']);
    // An upstream that never ends its event: the reader stops at the bound instead of growing.
    let sent = 0;
    const endless = new Readable({
      read() {
        sent++;
        this.push(Buffer.from(sent === 1 ? 'data: ' : 'x'.repeat(1024)));
      },
    });
    const read = async () => {
      for await (const _ of sseData(endless, 64 * 1024)) {
        // nothing completes
      }
    };
    await expect(read()).rejects.toThrow(/longer than 65536 characters/);
    expect(sent).toBeLessThan(100);
    expect(endless.destroyed).toBe(true);
  });
});
