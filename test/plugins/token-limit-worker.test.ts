/**
 * The token-limit stage's tokenizer runs in a worker thread (plugins/rate-limit/token-counter.ts):
 * loading an encoding evaluates its BPE ranks (a few hundred ms, measured here in a child process)
 * and must not hold the event loop that serves requests, as it would when a hot reload adds the
 * first token-limit stage. Also: what waits for the worker is bounded (more than 64 texts waiting
 * are estimated, not queued), a count that takes too long falls back to the estimate and a stuck
 * worker is replaced, the worker never keeps a process alive, and an encoding that cannot be
 * loaded estimates every prompt. The fallback never reserves fewer tokens than one per 3 UTF-8
 * bytes.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { completeCount, countPrefix, estimateTokens, workerBounds } from '../../plugins/rate-limit/bounded-count.ts';
import type { Encoding } from '../../plugins/rate-limit/token-count.ts';
import {
  acquireTokenizer,
  inlineLimits,
  type Tokenizer,
  tokenizerLimits,
} from '../../plugins/rate-limit/token-counter.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';

const held: Tokenizer[] = [];
afterAll(async () => {
  await Promise.all(held.map((t) => t.release()));
});

function acquire(encoding: Encoding): Tokenizer {
  const t = acquireTokenizer(encoding, silentLogger);
  held.push(t);
  return t;
}

/** How long importing the encoding holds a fresh process's main thread (ms). */
function importMs(encoding: Encoding): number {
  const script = `const t = performance.now(); await import('gpt-tokenizer/encoding/${encoding}'); console.log(performance.now() - t);`;
  return Number(
    execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd() }).toString(),
  );
}

/**
 * About 170 tokens counted, 340 estimated. One of the worker's 1 KiB slices, which it counts whole
 * however long that takes: its count is exact even on a loaded machine, where a longer text's
 * second slice may be past the worker's 25 ms budget and estimated (a fresh worker's first count
 * took that long here with both cores busy: 171 counted + 60 estimated instead of 202).
 */
const english = 'hello world '.repeat(85);

/**
 * The same bounded count on this thread, with the tokenizer loaded here (after the first test):
 * what the worker must answer. `upto`: the text is cut there before counting, as the main thread
 * cuts it to exact_count_chars before posting it.
 */
async function exact(text: string, upto = 65536): Promise<number> {
  const { countTokens } = await import('gpt-tokenizer/encoding/o200k_base');
  return completeCount(text, countPrefix(text.slice(0, upto), countTokens, upto, text.length > upto));
}

describe('the tokenizer worker', () => {
  it('loading the encoding and the first count happen in the worker, not on this thread (figures printed)', async () => {
    const imported = importMs('o200k_base');
    // Where the work runs is checked, not the count's time budget (a fresh worker's first count
    // can pass 25 ms on a loaded machine and be estimated).
    const saved = tokenizerLimits.timeoutMs;
    tokenizerLimits.timeoutMs = 60_000;
    onTestFinished(() => {
      tokenizerLimits.timeoutMs = saved;
    });
    // The longest gap between ticks of a 5 ms timer while a fresh worker starts, loads the
    // encoding and counts its first prompt.
    let maxGap = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 5);
    const histogram = monitorEventLoopDelay({ resolution: 5 });
    histogram.enable();
    const started = performance.now();
    const tokenizer = acquire('o200k_base'); // what a token-limit stage does when it is built
    expect(await tokenizer.ready()).toBe(true); // ... and waits for, before serving
    const tokens = await tokenizer.count(english, 65536);
    const firstCount = performance.now() - started;
    histogram.disable();
    clearInterval(ticker);
    console.info(
      `encoding import in a child process: ${imported.toFixed(0)} ms; worker start, load and first count: ${firstCount.toFixed(0)} ms, ` +
        `longest timer gap meanwhile: ${maxGap.toFixed(1)} ms, max loop delay: ${(histogram.max / 1e6).toFixed(1)} ms`,
    );
    // Counted by the tokenizer in the worker, not estimated (400). A fresh worker's first slices
    // can use up its 25 ms of tokenizer time on a loaded machine (231 seen at load 10-14, issue
    // 32): the rest is then completed at the counted ratio, never under the exact count here.
    expect(tokens).toBeLessThan(estimateTokens(english));
    expect(tokens).toBeGreaterThanOrEqual(await exact(english));
    expect(tokenizer.available()).toBe(true);
    // The times above depend on the machine and its load, so they are printed, not bounded (issue
    // 32); what keeps the import off this loop is where it is: the worker module imports an
    // encoding, and the module this thread runs starts that worker instead. The one other import
    // is `loadInline` (short texts counted on this thread), which the stage calls only before the
    // service listens (env.service.mainUrl unset: its start, never a hot reload while serving).
    const source = (file: string) => readFileSync(new URL(`../../plugins/rate-limit/${file}`, import.meta.url), 'utf8');
    const importsEncoding = /import\s*\(\s*`gpt-tokenizer\/encoding\//;
    expect(source('token-worker.ts')).toMatch(importsEncoding);
    for (const file of readdirSync(new URL('../../plugins/rate-limit/', import.meta.url))) {
      if (file.endsWith('.ts') && file !== 'token-worker.ts' && file !== 'token-counter.ts')
        expect(source(file), file).not.toMatch(/from 'gpt-tokenizer|import\(\s*[`'"]gpt-tokenizer/);
    }
    const counter = source('token-counter.ts');
    expect(counter).not.toMatch(/from 'gpt-tokenizer/);
    expect(counter.match(/import\(\s*[`'"]gpt-tokenizer/g)).toHaveLength(1);
    expect(counter.slice(counter.indexOf('loadInline(): Promise<void> {'))).toMatch(importsEncoding);
    expect(counter).toMatch(/startTypeScriptWorker\(WORKER_MODULE/);
    const stage = source('token-stage.ts');
    expect(stage.match(/loadInline\(/g)).toHaveLength(1);
    expect(stage).toMatch(/if \(tokenizer && env\.service\.mainUrl === undefined\) await tokenizer\.loadInline\(\);/);
  }, 60_000);

  it('stages share one worker per encoding: a second stage counts at once', async () => {
    const a = acquire('o200k_base');
    const b = acquire('o200k_base');
    expect(await a.ready()).toBe(true);
    expect(await b.count(english, 65536)).toBe(await exact(english));
    // A stage that closes leaves the worker to the others.
    await a.release();
    expect(await b.count(english, 65536)).toBe(await exact(english));
  });

  it('with the encoding loaded on this thread, short texts are counted here, without the worker', async () => {
    // Its own encoding: the other tests here count through o200k_base's worker.
    const tokenizer = acquire('cl100k_base');
    expect(await tokenizer.ready()).toBe(true);
    await tokenizer.loadInline();
    expect(tokenizer.countsInline()).toBe(true);
    const { countTokens } = await import('gpt-tokenizer/encoding/cl100k_base');
    const short = 'hello world '.repeat(20); // one slice: the exact count
    const hostile = 'x7Q/+9zA'.repeat(20); // a run without spaces: the worker's
    const medium = 'hello world '.repeat(300); // 3600 characters: still inline, in slices
    const long = 'hello world '.repeat(400); // over inlineLimits.chars: the worker's
    expect(medium.length).toBeLessThanOrEqual(inlineLimits.chars);
    expect(long.length).toBeGreaterThan(inlineLimits.chars);
    const saved = tokenizerLimits.maxWaiting;
    // No text may be sent to the worker now: what reaches it is estimated instead.
    tokenizerLimits.maxWaiting = 0;
    try {
      expect(await tokenizer.count(short, 65536)).toBe(countTokens(short));
      const inlineCount = countPrefix(medium, countTokens, 65536, false, {
        ...inlineLimits,
        budgetMs: Infinity,
      }).tokens;
      const m = await tokenizer.count(medium, 65536);
      // Counted here; on a loaded machine the inline budget may run out first, and the rest (the
      // worker's, which takes nothing now) is estimated: never under the count, never over the estimate.
      expect(m).toBeGreaterThanOrEqual(inlineCount);
      expect(m).toBeLessThanOrEqual(estimateTokens(medium));
      expect(await tokenizer.count(long, 65536)).toBe(estimateTokens(long));
      expect(await tokenizer.count(hostile, 65536)).toBe(estimateTokens(hostile));
    } finally {
      tokenizerLimits.maxWaiting = saved;
    }
    // And the worker still counts what is too long for this thread: its first slice at least (the
    // rest within its time budget, which a loaded machine may use up), so under the estimate and
    // never under the count.
    const longCount = await tokenizer.count(long, 65536);
    expect(longCount).toBeLessThan(estimateTokens(long));
    expect(longCount).toBeGreaterThanOrEqual(countTokens(long));
  });

  it('the spelling of a special token is ordinary text: counted as such on this thread and in the worker, never an error', async () => {
    const text = 'Which text ends a document, <|endoftext|> or <|endofprompt|>? And <|fim_prefix|>? '.repeat(4);
    const ordinary = { disallowedSpecial: new Set<string>() };
    // Here (cl100k_base, loaded on this thread above) and in the worker (o200k_base, not loaded here).
    const here = acquire('cl100k_base');
    await here.loadInline();
    const cl100k = await import('gpt-tokenizer/encoding/cl100k_base');
    expect(() => cl100k.countTokens(text)).toThrow(/special token/); // the library's default
    expect(await here.count(text, 65536)).toBe(cl100k.countTokens(text, ordinary));
    const inWorker = acquire('o200k_base');
    expect(inWorker.countsInline()).toBe(false);
    const o200k = await import('gpt-tokenizer/encoding/o200k_base');
    // Twice: a worker that crashed on the first would be restarting, and the second estimated.
    for (let i = 0; i < 2; i++) expect(await inWorker.count(text, 65536)).toBe(o200k.countTokens(text, ordinary));
  });

  it('more than 64 texts waiting: the rest are estimated at once, not queued', async () => {
    const tokenizer = acquire('o200k_base');
    expect(await tokenizer.ready()).toBe(true);
    const results = await Promise.all(Array.from({ length: 200 }, () => tokenizer.count(english, 65536)));
    const counted = await exact(english);
    expect(results.filter((n) => n === counted)).toHaveLength(tokenizerLimits.maxWaiting);
    expect(results.filter((n) => n === estimateTokens(english))).toHaveLength(200 - tokenizerLimits.maxWaiting);
    // Once answered, counting resumes.
    expect(await tokenizer.count(english, 65536)).toBe(await exact(english));
  });

  it('a count over its time limit is estimated, the stuck worker replaced; the next one counts again', async () => {
    const tokenizer = acquire('o200k_base');
    expect(await tokenizer.ready()).toBe(true);
    const hostile = Buffer.alloc(48 * 1024, 'x7Q/+9zA').toString('base64'); // 64 KiB without a space
    const saved = tokenizerLimits.timeoutMs;
    tokenizerLimits.timeoutMs = 1;
    try {
      expect(await tokenizer.count(hostile, 65536)).toBe(estimateTokens(hostile));
    } finally {
      tokenizerLimits.timeoutMs = saved;
    }
    await sleep(1100); // a worker is restarted at most once a second
    expect(english.length).toBeLessThanOrEqual(workerBounds.sliceChars); // counted whole, however slowly
    expect(await tokenizer.ready()).toBe(true);
    // The new worker counts exactly again: given all the time it needs (a loaded machine can take
    // the default budget's milliseconds just to schedule it), so what is checked is the count.
    tokenizerLimits.timeoutMs = 60_000;
    try {
      expect(await tokenizer.count(english, 65536)).toBe(await exact(english));
    } finally {
      tokenizerLimits.timeoutMs = saved;
    }
  });

  it('texts are cut to exact_count_chars before the worker; the rest is estimated, never under one token per 3 bytes', async () => {
    const tokenizer = acquire('o200k_base');
    const text = english + 'x7Q/+9zA'.repeat(1000);
    expect(await tokenizer.ready()).toBe(true);
    // What is cut is checked, not the time budget (a loaded machine can spend it scheduling the worker).
    const saved = tokenizerLimits.timeoutMs;
    tokenizerLimits.timeoutMs = 60_000;
    onTestFinished(() => {
      tokenizerLimits.timeoutMs = saved;
    });
    const tokens = await tokenizer.count(text, english.length);
    // The worker counts the start (cut at its last space); the main thread estimates the rest.
    expect(tokens).toBe(await exact(text, english.length));
    expect(tokens).toBeGreaterThan(await exact(english));
    expect(tokens).toBeGreaterThanOrEqual(estimateTokens(text.slice(english.length)));
    // Nothing to count exactly: the estimate.
    expect(await tokenizer.count(text, 0)).toBe(estimateTokens(text));
  });

  it('the worker never keeps the process alive: a process that counted and never released it exits', () => {
    const module = new URL('../../plugins/rate-limit/token-counter.ts', import.meta.url).href;
    const logger = new URL('../../runtime/observability/logger.ts', import.meta.url).href;
    const script = `
      const { acquireTokenizer } = await import(${JSON.stringify(module)});
      const { silentLogger } = await import(${JSON.stringify(logger)});
      const t = acquireTokenizer('cl100k_base', silentLogger);
      const keep = setTimeout(() => {}, 20000); // what holds a service's loop while it loads
      const ready = await t.ready();
      clearTimeout(keep);
      console.log(ready, await t.count('hello world', 65536));`;
    // A file, not `-e`: a worker inherits the process's execArgv, `-e` and its script included.
    const file = join(mkdtempSync(join(tmpdir(), 'token-worker-')), 'exits.mjs');
    writeFileSync(file, script);
    const out = execFileSync(process.execPath, ['--import', 'tsx', file], { cwd: process.cwd(), timeout: 20_000 });
    expect(out.toString().trim()).toBe('true 2');
  }, 30_000);

  it('an encoding that cannot be loaded: every prompt is estimated', async () => {
    const tokenizer = acquire('no_such_encoding' as Encoding);
    expect(await tokenizer.ready()).toBe(false);
    expect(tokenizer.available()).toBe(false);
    expect(await tokenizer.count(english, 65536)).toBe(estimateTokens(english));
  });
});
