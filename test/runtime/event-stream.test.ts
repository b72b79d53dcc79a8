/**
 * The SSE filter stream of answers (runtime/answer/event-stream.ts), fed through real Node streams in
 * chunks cut anywhere: events the filters pass come out byte for byte, changed ones serialised,
 * in upstream order whether a filter answers at once or with a promise; a filter that ends the
 * stream cuts it right there, mid-chunk included.
 */
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SseFilterTransform } from '../../runtime/answer/event-stream.ts';
import type { SseEvent, SseFilter, SseVerdict } from '../../runtime/index.ts';
import { cut } from '../helpers/cut-text.ts';

/** Pipes `chunks` through the filters; the text written out, and how often the upstream was cancelled. */
async function filtered(chunks: string[], filters: SseFilter[]): Promise<{ out: string; cancelled: number }> {
  let cancelled = 0;
  const transform = new SseFilterTransform(filters, () => cancelled++);
  const source = Readable.from(chunks.map((c) => Buffer.from(c)));
  const parts: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    source.pipe(transform);
    transform.on('data', (b: Buffer) => parts.push(b));
    transform.once('end', resolve);
    transform.once('error', reject);
  });
  return { out: Buffer.concat(parts).toString(), cancelled };
}

const pass: SseFilter = { onEvent: (event) => ({ events: [event] }) };
const later = <T>(value: T) => new Promise<T>((r) => setImmediate(() => r(value)));

/** Upper-cases the data of events whose data contains `x`; answers with a promise every other event. */
function upperX(): SseFilter {
  let n = 0;
  return {
    onEvent(event): SseVerdict | Promise<SseVerdict> {
      const verdict = { events: [event.data.includes('x') ? { ...event, data: event.data.toUpperCase() } : event] };
      return n++ % 2 ? later(verdict) : verdict;
    },
  };
}

const stream = [
  'data: {"a":1}\n\n',
  'event: note\nid: 7\ndata: line one\ndata: line two\n\n',
  'data: x marks\r\n\r\n',
  ': a comment\ndata: y\n\n',
  'data: [DONE]\n\n',
].join('');

describe('SSE filter stream', () => {
  it('passes events untouched byte for byte, however the upstream cuts its chunks', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 12 }), async (at) => {
        const { out, cancelled } = await filtered(cut(stream, at), [pass, pass]);
        expect(out).toBe(stream);
        expect(cancelled).toBe(0);
      }),
      { numRuns: 60 },
    );
  });

  it('keeps upstream order when filters answer at once and with promises, and serialises what they change', async () => {
    const expected = [
      'data: {"a":1}\n\n',
      'event: note\nid: 7\ndata: line one\ndata: line two\n\n',
      'data: X MARKS\n\n', // changed: serialised (LF separators)
      ': a comment\ndata: y\n\n',
      'data: [DONE]\n\n',
    ].join('');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 12 }), async (at) => {
        const { out } = await filtered(cut(stream, at), [upperX(), pass]);
        expect(out).toBe(expected);
      }),
      { numRuns: 60 },
    );
  });

  it('a filter that ends the stream cuts it there, mid-chunk, and cancels the upstream once', async () => {
    const stopAtX = (async: boolean): SseFilter => ({
      onEvent(event) {
        const verdict: SseVerdict = event.data.startsWith('x')
          ? { events: [{ data: 'stopped' }], end: true }
          : { events: [event] };
        return async ? later(verdict) : verdict;
      },
    });
    const seen: SseEvent[] = [];
    const spy: SseFilter = {
      onEvent(event) {
        seen.push(event);
        return { events: [event] };
      },
    };
    for (const async of [false, true]) {
      seen.length = 0;
      const { out, cancelled } = await filtered([stream], [stopAtX(async), spy]);
      expect(out).toBe('data: {"a":1}\n\nevent: note\nid: 7\ndata: line one\ndata: line two\n\ndata: stopped\n\n');
      expect(cancelled).toBe(1);
      // Filters after the one that ended see how it ended (the stages further out, e.g. the audit),
      // and nothing after that.
      expect(seen.map((e) => e.data)).toEqual(['{"a":1}', 'line one\nline two', 'stopped']);
    }
  });

  it("appends the filters' end events through the filters after them, and passes a last event without a blank line", async () => {
    const closing: SseFilter = { onEvent: (e) => ({ events: [e] }), onEnd: async () => [{ data: 'bye' }] };
    const shout: SseFilter = { onEvent: (e) => ({ events: [{ ...e, data: e.data.toUpperCase() }] }) };
    const { out } = await filtered(['data: a\n\ndata: b'], [closing]);
    expect(out).toBe('data: a\n\ndata: b\n\ndata: bye\n\n');
    expect((await filtered(['data: a\n\n'], [closing, shout])).out).toBe('data: A\n\ndata: BYE\n\n');
    // Nothing appended: the unfinished event goes out as it came.
    expect((await filtered(['data: a\n\ndata: b'], [pass])).out).toBe('data: a\n\ndata: b');
  });

  it('a filter that throws fails the stream', async () => {
    const broken: SseFilter = {
      onEvent() {
        throw new Error('broken filter');
      },
    };
    await expect(filtered(['data: a\n\n'], [broken])).rejects.toThrow('broken filter');
  });
});
