/**
 * The main thread's side of the tokenizer: one worker thread per encoding per process
 * (token-worker.ts), shared by every token-limit stage using that encoding, started lazily and
 * ref-counted by the stages (`acquireTokenizer` / `release`): the last stage to close stops it.
 * The worker is unreferenced, so it never keeps the process alive.
 *
 * Why a worker: importing an encoding evaluates its BPE ranks (160-530 ms measured here, once per
 * process), and a hot reload that adds the first token-limit stage would pay it while serving;
 * counting a hostile prompt costs up to 25 ms more per request. The event loop only cuts the text
 * to `exactChars`, posts it, and completes the count (bounded-count.ts `completeCount`).
 *
 * Short texts are counted inline (no worker round trip, which cost more than counting them):
 * when the process loaded the encoding on its main thread too, a text of at most
 * `inlineLimits.chars` characters with no run of more than 64 characters without white space
 * (what makes BPE slow: base64, hex, text without spaces) is counted there, in the worker's
 * slices (so to the same count), until 0.25 ms of tokenizer time is spent; what is left then goes
 * to the worker. Ordinary text costs ~0.1 ms per KiB: the event loop is held about a millisecond
 * at most. The main thread loads the
 * encoding only when a stage is created before the service listens (its start, which the
 * import's 160-530 ms delays; never a hot reload while serving, which would block requests).
 *
 * Fail safe: whenever the tokenizer cannot answer in time the prompt is estimated at one token
 * per 3 UTF-8 bytes (what the count never goes under), never reserved for less:
 * - more than `maxWaiting` (64) texts already waiting for the worker: estimated at once, not
 *   queued (a burst is not held behind the tokenizer, and memory stays bounded);
 * - no answer within `timeoutMs` (1 s, from the moment the text is sent: queueing included);
 *   when the worker answered nothing for that long it is terminated, and the next count starts
 *   a new one;
 * - the worker is not loaded: restarting after a crash (on the next count, at most once a
 *   second; a stage waits for the first worker to load before it serves, at most 10 s), or
 *   gpt-tokenizer cannot be loaded (then never again in this process; logged once).
 */
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { startTypeScriptWorker } from '../../runtime/index.ts';
import {
  type CountBounds,
  type CountFn,
  completeCount,
  countPrefix,
  type EncodingModule,
  estimateTokens,
  ordinaryCount,
} from './bounded-count.ts';
import type { Encoding, TextCounter } from './token-count.ts';
import type { TokenJob, TokenReply, TokenWorkerReady } from './token-worker.ts';

const WORKER_MODULE = new URL('./token-worker.ts', import.meta.url);

export interface TokenizerLimits {
  /** Texts sent to the worker and not answered yet; one more is estimated instead. */
  maxWaiting: number;
  /** Per count, from sending; then the estimate. */
  timeoutMs: number;
  /** Old-generation heap of the worker, MiB (the o200k_base ranks take 20-35). */
  memoryMb: number;
}

export const tokenizerLimits: TokenizerLimits = { maxWaiting: 64, timeoutMs: 1000, memoryMb: 256 };

/** Texts up to `chars` characters are counted on the main thread (see the module comment). */
export const inlineLimits: CountBounds & { chars: number; maxRun: number } = {
  chars: 4096,
  // The worker's slices: the same cuts, so the same count as the worker's.
  sliceChars: 1024,
  budgetMs: 0.25,
  // A run of more than this many characters without white space (base64, a hex dump, text
  // without spaces) is what makes BPE slow: such texts go to the worker.
  maxRun: 64,
};

/** Whether `text` has a run of more than `max` characters without white space. */
function hasLongRun(text: string, max: number): boolean {
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d) run = 0;
    else if (++run > max) return true;
  }
  return false;
}
const restartAfterMs = 1000;

interface Pending {
  text: string;
  resolve: (tokens: number) => void;
  timer: NodeJS.Timeout;
}

/** A stage's handle on its encoding's shared worker. */
export interface Tokenizer {
  readonly encoding: Encoding;
  /** Counts `text` (bounded, see the module comment); never rejects. */
  count: TextCounter;
  /** Resolves once the worker loaded the encoding (true) or could not (false: every count is an estimate). */
  ready(): Promise<boolean>;
  /**
   * Loads the encoding on the main thread as well, so that short texts are counted without the
   * worker (see the module comment): call it only before the service serves (it blocks the event
   * loop 160-530 ms once per process and encoding).
   */
  loadInline(): Promise<void>;
  /** Whether short texts are counted on the main thread. */
  countsInline(): boolean;
  /** False once gpt-tokenizer turned out not to load here. */
  available(): boolean;
  release(): Promise<void>;
}

class SharedTokenizer {
  refs = 0;
  private worker: Worker | undefined;
  /** The worker loaded the encoding and takes texts. */
  private loaded = false;
  private readyPromise: Promise<boolean> | undefined;
  private unavailable = false;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private lastAnswer = 0;
  private lastStart = Number.NEGATIVE_INFINITY;
  /** The encoding on the main thread, for short texts; undefined until (unless) loaded. */
  private inline: CountFn | undefined;
  private inlineLoading: Promise<void> | undefined;

  constructor(
    readonly encoding: Encoding,
    private readonly logger: Logger,
  ) {}

  available(): boolean {
    return !this.unavailable;
  }

  /** Starts the worker when there is none (and none crashed in the last second). */
  ready(): Promise<boolean> {
    if (this.unavailable) return Promise.resolve(false);
    if (this.worker && this.readyPromise) return this.readyPromise;
    if (performance.now() - this.lastStart < restartAfterMs) return Promise.resolve(false);
    this.lastStart = performance.now();
    let worker: Worker;
    try {
      worker = startTypeScriptWorker(WORKER_MODULE, {
        workerData: { encoding: this.encoding },
        resourceLimits: { maxOldGenerationSizeMb: tokenizerLimits.memoryMb },
      });
    } catch (err) {
      this.giveUp((err as Error).message);
      return Promise.resolve(false);
    }
    this.worker = worker;
    this.readyPromise = new Promise<boolean>((resolve) => {
      const onFirst = (message: TokenWorkerReady) => {
        if (message.ready) {
          this.loaded = true;
          this.lastAnswer = performance.now();
          worker.on('message', (reply: TokenReply) => this.answer(reply));
          worker.unref(); // after adding 'message' listeners, which ref the worker's port again
          resolve(true);
        } else {
          this.giveUp(message.error);
          resolve(false);
        }
      };
      worker.once('message', onFirst);
      worker.on('error', (err) => {
        this.logger.warn(
          { err: err.message, encoding: this.encoding },
          'token limit: the tokenizer worker failed; prompts are estimated until it restarts',
        );
      });
      worker.once('exit', (code) => {
        worker.off('message', onFirst);
        if (this.worker === worker) this.dropWorker();
        resolve(false);
        if (code !== 0 && code !== 1 && !this.unavailable)
          this.logger.warn({ code, encoding: this.encoding }, 'token limit: the tokenizer worker exited');
      });
      worker.unref(); // never keeps the process alive, loading or not
    });
    return this.readyPromise;
  }

  /**
   * Loads the encoding on the main thread too (blocks it 160-530 ms: only before the service
   * serves). Never fails: without it every count goes to the worker.
   */
  loadInline(): Promise<void> {
    this.inlineLoading ??= (async () => {
      try {
        this.inline = ordinaryCount((await import(`gpt-tokenizer/encoding/${this.encoding}`)) as EncodingModule);
      } catch {
        // Not installed: the worker says so (giveUp) and every count is an estimate.
      }
    })();
    return this.inlineLoading;
  }

  /** Whether short texts are counted on the main thread. */
  countsInline(): boolean {
    return this.inline !== undefined;
  }

  async count(text: string, exactChars: number): Promise<number> {
    if (text === '') return 0;
    if (exactChars <= 0 || this.unavailable) return estimateTokens(text);
    const inline = this.inline;
    if (inline !== undefined && text.length <= inlineLimits.chars && !hasLongRun(text, inlineLimits.maxRun)) {
      const counted = countPrefix(text, inline, exactChars, false, inlineLimits);
      if (counted.chars >= text.length || counted.chars >= exactChars) return completeCount(text, counted);
      // Its time ran out (a hostile text): the rest is the worker's.
      return counted.tokens + (await this.viaWorker(text.slice(counted.chars), exactChars - counted.chars));
    }
    return this.viaWorker(text, exactChars);
  }

  private viaWorker(text: string, exactChars: number): Promise<number> | number {
    // More than maxWaiting texts ahead: estimate now rather than queue (bounded wait and memory).
    if (this.pending.size >= tokenizerLimits.maxWaiting) return estimateTokens(text);
    if (!this.worker) void this.ready();
    // Not loaded yet (a worker restarting after a crash; a stage waits for the first one before
    // serving): estimated, a request never waits for a worker to start.
    const worker = this.worker;
    if (!worker || !this.loaded) return estimateTokens(text);
    const id = this.nextId++;
    const job: TokenJob = { id, text: text.slice(0, exactChars), exactChars, more: text.length > exactChars };
    return new Promise<number>((resolve) => {
      const timer = setTimeout(() => this.timeout(id), tokenizerLimits.timeoutMs);
      this.pending.set(id, { text, resolve, timer });
      worker.postMessage(job);
    });
  }

  private answer(reply: TokenReply): void {
    this.lastAnswer = performance.now();
    const p = this.pending.get(reply.id);
    if (!p) return; // timed out already: it was estimated
    this.pending.delete(reply.id);
    clearTimeout(p.timer);
    p.resolve(completeCount(p.text, reply));
  }

  private timeout(id: number): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    p.resolve(estimateTokens(p.text));
    // Nothing answered for a whole timeout (and loaded): stuck, not merely busy. A new one starts on the next count.
    const worker = this.worker;
    if (worker && performance.now() - this.lastAnswer >= tokenizerLimits.timeoutMs) {
      this.logger.warn(
        { encoding: this.encoding },
        'token limit: the tokenizer worker stopped answering; restarting it',
      );
      this.dropWorker();
      void worker.terminate();
    }
  }

  /** Forgets the worker; what waited for it is estimated. */
  private dropWorker(): void {
    this.worker = undefined;
    this.loaded = false;
    this.readyPromise = undefined;
    this.lastAnswer = 0;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      clearTimeout(p.timer);
      p.resolve(estimateTokens(p.text));
    }
  }

  private giveUp(error: string): void {
    if (this.unavailable) return;
    this.unavailable = true;
    this.logger.warn(
      { err: error, encoding: this.encoding },
      'token limit: the tokenizer (gpt-tokenizer) cannot be loaded; prompts are estimated at one token per 3 bytes',
    );
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.dropWorker();
    if (worker) await worker.terminate();
  }
}

const shared = new Map<Encoding, SharedTokenizer>();

/** The stage's handle on the process's worker for `encoding` (started now if there is none). */
export function acquireTokenizer(encoding: Encoding, logger: Logger): Tokenizer {
  let s = shared.get(encoding);
  if (!s) {
    s = new SharedTokenizer(encoding, logger);
    shared.set(encoding, s);
  }
  const t = s;
  t.refs++;
  void t.ready();
  let released = false;
  return {
    encoding,
    count: (text, exactChars) => t.count(text, exactChars),
    ready: () => t.ready(),
    loadInline: () => t.loadInline(),
    countsInline: () => t.countsInline(),
    available: () => t.available(),
    async release() {
      if (released) return;
      released = true;
      if (--t.refs > 0) return;
      if (shared.get(encoding) === t) shared.delete(encoding);
      await t.close();
    },
  };
}
