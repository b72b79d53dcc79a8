/**
 * `npx tsx bench/safety-filter/chunk-check.ts`: CPU per streamed chunk of the egress stream check
 * alone, in process (no HTTP, no Koa): the shipped config's egress classifiers (`pii`, `secrets`)
 * behind streamCheck, fed the bench's answer as OpenAI chunks of 4 characters, one event at a
 * time as a paced model sends them. For iterating on the check's cost with less noise than
 * bench:safety (whose figure includes the proxy); the figure that counts is bench:safety's.
 *
 * Env: CHUNKS (default 200000), ROUNDS (5), CHUNK_CHARS (4), TEXT (`prose`, the backend's filler;
 * `mixed`: prose with numbers, addresses and a key in it), BASELINE (another checkout: its check
 * runs too, in the same process, rounds interleaved).
 */
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import type { PolicyDecision, SseEvent, SseFilter } from '../../runtime/index.ts';

const chunks = Number(process.env.CHUNKS ?? 200_000);
const rounds = Number(process.env.ROUNDS ?? 5);
const size = Number(process.env.CHUNK_CHARS ?? 4);
const prose = 'The quick brown fox jumps over the lazy dog. ';
const mixed =
  'Call me on 020 7946 0958 or write to ops@example.org before 5 pm. The build id is 4411 and the ' +
  'token field stays empty: config key = value. Our plan for Q3: ship v2.1, then review. ';
const text = process.env.TEXT === 'mixed' ? mixed : prose;

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

/** One stream's filter of a checkout, checking as the policy stage does (the rules left out: nothing scores). */
function filterOf(m: Modules): () => SseFilter {
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
  return () =>
    m.streamCheck({
      trigger,
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

function events(n: number): SseEvent[] {
  const out: SseEvent[] = [];
  const head = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm' };
  const long = text.repeat(Math.ceil((n * size) / text.length) + 1);
  for (let i = 0; i < n; i++) {
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

const input = events(chunks);
const variants: Array<[string, () => SseFilter]> = [['this checkout', filterOf(await load(resolve('.')))]];
if (process.env.BASELINE) variants.push(['baseline', filterOf(await load(process.env.BASELINE))]);
const samples = new Map<string, number[]>(variants.map(([name]) => [name, []]));
let out = 0;
for (let r = 0; r < rounds + 1; r++) {
  for (const [name, filter] of r % 2 ? [...variants].reverse() : variants) {
    const f = filter();
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    for (const e of input) {
      const v = f.onEvent(e);
      if (v instanceof Promise) throw new Error('a Tier A check answered with a promise');
      out += v === undefined ? 1 : v.events.length;
    }
    const used = process.cpuUsage(cpu);
    const ns = ((used.user + used.system) * 1000) / chunks;
    // The first round warms up.
    if (r > 0) samples.get(name)?.push(ns);
    if (r > 0)
      console.log(
        `round ${r} ${name}: ${ns.toFixed(0)} ns CPU per chunk (${(((performance.now() - t0) * 1e6) / chunks).toFixed(0)} ns wall)`,
      );
  }
}
const median = (list: number[]) => [...list].sort((a, b) => a - b)[list.length >> 1] ?? Number.NaN;
const mine = median(samples.get('this checkout') ?? []);
const base = median(samples.get('baseline') ?? []);
console.log(
  `median: this checkout ${mine.toFixed(0)} ns CPU per chunk` +
    (process.env.BASELINE ? `, baseline ${base.toFixed(0)} ns (${(mine / base).toFixed(2)}x)` : '') +
    `; ${chunks} chunks of ${size} characters, ${(out / (rounds + 1) / variants.length / chunks).toFixed(2)} events out per chunk`,
);
