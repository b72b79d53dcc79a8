/**
 * Egress checks on a stream (stream-check.ts), driven event by event: what the client receives
 * with and without a hold-back. The checker is a plain function here (a block on "SECRET-KEY", a
 * redact of e-mail addresses) so that every release decision can be asserted.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redact } from '../../plugins/classify/api.ts';
import { streamCheck, type WindowVerdict } from '../../plugins/policy/stream-check.ts';
import type { PolicyDecision, SseEvent } from '../../runtime/index.ts';

const secret = 'SECRET-KEY';
const email = /[a-z]+@example\.org/g;

/** The check as a classifier that answers at once (Tier A) runs it; `check` is the same, waiting (a model). */
function checkNow(window: string): WindowVerdict {
  if (window.includes(secret)) return { decision: { action: 'block', rule: 'no-secret' }, spans: [] };
  const spans = [...window.matchAll(email)].map((m) => ({
    start: m.index,
    end: m.index + m[0].length,
    label: 'EMAIL',
  }));
  return spans.length > 0
    ? { decision: { action: 'redact', rule: 'mask' }, spans }
    : { decision: { action: 'allow' }, spans: [] };
}
const check = async (window: string) => checkNow(window);

const chunk = (content: string): SseEvent => ({
  data: JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] }),
});

/** Streams `parts` through a filter; returns the text the client got and whether it was cut. */
async function run(parts: string[], holdbackChars: number, sync = false) {
  const decided: PolicyDecision[] = [];
  let completions = 0;
  const filter = streamCheck({
    windowChars: 256,
    scanEveryChars: 8,
    holdbackChars,
    check: sync ? checkNow : check,
    decided: async (d) => {
      decided.push(d);
    },
    errorBody: () => ({ error: { type: 'safety_violation' } }),
    mask: (text, spans) => redact(text, spans),
    ended: () => {
      completions++;
    },
  });
  const out: SseEvent[] = [];
  let ended = false;
  for (const part of [...parts.map(chunk), { data: '[DONE]' }]) {
    const verdict = (await filter.onEvent(part)) ?? { events: [part] };
    out.push(...verdict.events);
    if (verdict.end) {
      ended = true;
      break;
    }
  }
  if (!ended) out.push(...((await filter.onEnd?.()) ?? []));
  let text = '';
  let finish: string | undefined;
  for (const e of out) {
    if (e.data === '[DONE]') continue;
    const parsed = JSON.parse(e.data);
    text += parsed.choices?.[0]?.delta?.content ?? '';
    finish = parsed.choices?.[0]?.finish_reason ?? finish;
  }
  const dones = out.filter((e) => e.data === '[DONE]').length;
  return { text, finish, decided, done: out.at(-1)?.data === '[DONE]', dones, completions };
}

describe.each([
  ['a check that waits', false],
  ['a check that answers at once', true],
])('stream egress checks, %s', (_, sync) => {
  const leak = ['Here is the ', 'key: SEC', 'RET-KEY and ', 'more text after it.'];

  it('without a hold-back, text goes out at once: part of a match can pass before the cut', async () => {
    const r = await run(leak, 0, sync);
    expect(r.finish).toBe('content_filter');
    expect(r.decided[0]).toMatchObject({ action: 'block' });
    expect(r.text).toContain('SEC'); // the documented exposure
  });

  it('with a hold-back as long as the match, none of it reaches the client', async () => {
    const r = await run(leak, 16, sync);
    expect(r.finish).toBe('content_filter');
    expect(r.done).toBe(true);
    expect(r.text).not.toContain('SEC');
  });

  it('without a hold-back, a redact masks the span in the chunk being sent, and is recorded once', async () => {
    const r = await run(['Mail jane@example.org now', ' or bob@example.org later.'], 0, sync);
    expect(r.text).toBe('Mail [EMAIL] now or [EMAIL] later.');
    expect(r.decided).toHaveLength(1);
    expect(r.done).toBe(true);
  });

  it('with a hold-back, a redact masks the whole span even across chunks', async () => {
    const r = await run(['Write to ja', 'ne@exam', 'ple.org today, ', 'thanks a lot for that.'], 24, sync);
    expect(r.text).toBe('Write to [EMAIL] today, thanks a lot for that.');
    expect(r.decided).toHaveLength(1);
  });

  it('property: without a hold-back, a leak anywhere (the last characters too) ends the stream before [DONE]', async () => {
    const words = fc.constantFrom('lorem ', 'ipsum ', 'dolor ', 'x', '\n');
    await fc.assert(
      fc.asyncProperty(
        fc.array(words, { maxLength: 30 }),
        fc.option(fc.nat(), { nil: undefined }),
        fc.integer({ min: 1, max: 7 }),
        async (ws, at, cut) => {
          const clean = ws.join('');
          const where = at === undefined ? undefined : at % (clean.length + 1);
          const text = where === undefined ? clean : clean.slice(0, where) + secret + clean.slice(where);
          const parts: string[] = [];
          for (let i = 0; i < text.length; i += cut) parts.push(text.slice(i, i + cut));
          const r = await run(parts, 0, sync);
          expect(r.done).toBe(true);
          expect(r.dones).toBe(1);
          if (where === undefined) {
            expect(r.text).toBe(text);
            expect(r.finish).toBeUndefined();
            expect(r.completions).toBe(1); // the answer is said complete once, and only when not cut
          } else {
            expect(r.finish).toBe('content_filter');
            expect(r.decided).toMatchObject([{ action: 'block' }]);
            expect(r.completions).toBe(0);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('property: with a hold-back, clean text arrives whole and in order; a leak never does', async () => {
    const words = fc.constantFrom('lorem ', 'ipsum ', 'dolor ', 'sit ', 'amet ', 'x', '\n');
    await fc.assert(
      fc.asyncProperty(
        fc.array(words, { minLength: 1, maxLength: 40 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 7 }),
        async (ws, leaks, cut) => {
          const text = ws.join('') + (leaks ? ` ${secret} ` : '') + ws.join('');
          const parts: string[] = [];
          for (let i = 0; i < text.length; i += cut) parts.push(text.slice(i, i + cut));
          const r = await run(parts, secret.length + 2, sync);
          if (leaks) {
            expect(r.finish).toBe('content_filter');
            expect(r.text).not.toContain('SECRET');
          } else {
            expect(r.text).toBe(text);
            expect(r.done).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
