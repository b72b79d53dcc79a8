/**
 * The egress stream check of a checkout, alone (no HTTP, no Koa), as chunk-check.ts and
 * chunk-instructions.ts run it: the shipped config's egress classifiers (`pii`, `secrets`) behind
 * streamCheck, and the bench's answer as OpenAI chunks of `size` characters.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PolicyDecision, SseEvent, SseFilter } from '../../runtime/index.ts';

const prose = 'The quick brown fox jumps over the lazy dog. ';
const mixed =
  'Call me on 020 7946 0958 or write to ops@example.org before 5 pm. The build id is 4411 and the ' +
  'token field stays empty: config key = value. Our plan for Q3: ship v2.1, then review. ';
/** The answer's text: `prose` (the backend's filler) or `mixed` (numbers, addresses and a key in it). */
export const benchText = (kind: string | undefined) => (kind === 'mixed' ? mixed : prose);

type Modules = {
  PatternClassifier: typeof import('../../plugins/classify/patterns/classifier.ts').PatternClassifier;
  redact: typeof import('../../plugins/classify/redact.ts').redact;
  streamCheck: typeof import('../../plugins/policy/stream-check.ts').streamCheck;
};
async function load(checkout: string): Promise<Modules> {
  const at = (path: string) => pathToFileURL(resolve(checkout, path)).href;
  const { PatternClassifier } = await import(at('plugins/classify/patterns/classifier.ts'));
  const { redact } = await import(at('plugins/classify/redact.ts'));
  const { streamCheck } = await import(at('plugins/policy/stream-check.ts'));
  return { PatternClassifier, redact, streamCheck };
}
const ALLOW: PolicyDecision = { action: 'allow' } as PolicyDecision;
const OPEN = { open: true } as const;

/**
 * A maker of one stream's filter of `checkout`, checking as the policy stage does (the rules left
 * out: nothing scores).
 */
export async function filterOf(checkout: string): Promise<() => SseFilter> {
  const m = await load(checkout);
  const classifiers = [
    new m.PatternClassifier({ name: 'pii', type: 'pattern', detectors: ['pii'] }),
    new m.PatternClassifier({ name: 'secrets', type: 'pattern', detectors: ['secrets'] }),
  ];
  // This checkout's classifiers have a trigger (a baseline's may not): as the classifier set combines them.
  const triggers = classifiers.map((c) => (c as { trigger?: { test(t: string): boolean; reach: number } }).trigger);
  const trigger = triggers.every((t) => t !== undefined)
    ? {
        reach: Math.max(...triggers.map((t) => t.reach)),
        test: (text: string) => triggers.some((t) => t.test(text)),
      }
    : undefined;
  // This checkout's classifiers give a release point alone (a baseline's may not): as the policy
  // stage asks it once a clean window's rules are known to allow (here, no rules: always).
  type WithRelease = { releasePoint?: (text: string) => number };
  const releasePoint = classifiers.every((c) => (c as WithRelease).releasePoint)
    ? (text: string) => {
        let least = text.length;
        for (const c of classifiers) least = Math.min(least, (c as WithRelease).releasePoint?.(text) ?? 0);
        return least;
      }
    : undefined;
  return () =>
    m.streamCheck({
      trigger,
      releasePoint,
      windowChars: 512,
      scanEveryChars: 128,
      holdbackChars: 258,
      openContextChars: 128,
      check(windowText, open, untriggered) {
        let pendingFrom = windowText.length;
        let decision = ALLOW;
        const options = untriggered ? { open, untriggered } : open ? OPEN : undefined;
        for (const c of classifiers) {
          const r = c.classifySync(windowText, options);
          if (r.pendingFrom !== undefined && r.pendingFrom < pendingFrom) pendingFrom = r.pendingFrom;
          if (r.score > 0) decision = { action: 'redact' } as PolicyDecision;
        }
        return { decision, spans: [], pendingFrom };
      },
      decided() {},
      errorBody: () => ({ error: 'blocked' }),
      mask: (t, spans) => m.redact(t, spans),
    });
}

/** `n` OpenAI chunks of `size` characters of `text` repeated (from chunk `from` of the answer on). */
export function benchEvents(n: number, size: number, text: string, from = 0): SseEvent[] {
  const out: SseEvent[] = [];
  const head = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm' };
  const long = text.repeat(Math.ceil(((from + n) * size) / text.length) + 1);
  for (let i = from; i < from + n; i++) {
    const piece = long.slice(i * size, (i + 1) * size);
    out.push({
      data: JSON.stringify({
        ...head,
        choices: [{ index: 0, delta: { content: piece }, logprobs: null, finish_reason: null }],
      }),
    });
  }
  return out;
}

/** Feeds `events` to a fresh filter one at a time, as a paced model sends them: the events that went out. */
export function feed(filter: SseFilter, events: SseEvent[]): number {
  let out = 0;
  for (const e of events) {
    const v = filter.onEvent(e);
    if (v instanceof Promise) throw new Error('a Tier A check answered with a promise');
    out += v === undefined ? 1 : v.events.length;
  }
  return out;
}
