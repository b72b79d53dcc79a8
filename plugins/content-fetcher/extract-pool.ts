/**
 * A small pool of extraction workers (extract-worker.mjs) so that HTML → text never runs on the
 * event loop. Pages queue in arrival order and go to the first idle worker, started on demand up
 * to `workers`. A page's time (`timeoutMs`) starts when a worker is ready for it; past it, or when
 * the caller gives up (its signal aborts), the worker is terminated, which is the only way to stop
 * a synchronous parse, and a fresh one is started for the next page. Each worker's heap is capped
 * (`maxHeapMb`): a page that needs more kills only its worker. Idle workers exit after `idleMs`,
 * returning their memory.
 */
import { Worker } from 'node:worker_threads';

const WORKER_ENTRY = new URL('./extract-worker.mjs', import.meta.url);

/** What extract-worker.mjs is sent, and answers. */
interface ExtractRequest {
  id: number;
  html: string;
}
type ExtractReply = { id: number; title: string; text: string } | { id: number; error: string } | { ready: true };

export interface ExtractPoolOptions {
  workers: number;
  timeoutMs: number;
  maxHeapMb: number;
  idleMs: number;
}

export interface Extracted {
  title: string;
  text: string;
}

/** The page's extraction ran past its time bound. */
export class ExtractTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`extraction took longer than ${timeoutMs} ms`);
  }
}

/** The worker died under the page (out of its heap cap) or the parser threw. */
export class ExtractFailedError extends Error {}

interface Job {
  id: number;
  html: string;
  signal: AbortSignal;
  resolve: (value: Extracted) => void;
  reject: (err: Error) => void;
  onAbort: () => void;
  timer?: NodeJS.Timeout;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  idleTimer?: NodeJS.Timeout;
}

export class ExtractPool {
  private readonly slots = new Set<Slot>();
  private readonly queue: Job[] = [];
  private nextId = 0;
  private closed = false;

  constructor(private readonly options: ExtractPoolOptions) {}

  /** Workers alive now (for tests and describe()). */
  get size(): number {
    return this.slots.size;
  }

  run(html: string, signal: AbortSignal): Promise<Extracted> {
    if (this.closed) return Promise.reject(new Error('extraction pool is closed'));
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<Extracted>((resolve, reject) => {
      const job: Job = { id: this.nextId++, html, signal, resolve, reject, onAbort: () => this.abort(job) };
      signal.addEventListener('abort', job.onAbort, { once: true });
      this.queue.push(job);
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) this.settle(job, new Error('extraction pool is closed'));
    await Promise.all([...this.slots].map((slot) => this.kill(slot, new Error('extraction pool is closed'))));
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = [...this.slots].find((s) => s.job === null);
      if (!slot) {
        if (this.slots.size >= this.options.workers) return;
        slot = this.spawn();
      }
      const job = this.queue.shift() as Job;
      clearTimeout(slot.idleTimer);
      slot.job = job;
      slot.worker.ref();
      slot.worker.postMessage({ id: job.id, html: job.html } satisfies ExtractRequest);
      if (slot.ready) this.startClock(slot, job);
    }
  }

  private spawn(): Slot {
    const worker = new Worker(WORKER_ENTRY, {
      resourceLimits: { maxOldGenerationSizeMb: this.options.maxHeapMb, maxYoungGenerationSizeMb: 32 },
      stdout: false,
      stderr: false,
    });
    const slot: Slot = { worker, ready: false, job: null };
    this.slots.add(slot);
    worker.on('message', (reply: ExtractReply) => {
      if ('ready' in reply) {
        slot.ready = true;
        if (slot.job) this.startClock(slot, slot.job);
        return;
      }
      const job = slot.job;
      if (!job || job.id !== reply.id) return;
      slot.job = null;
      if ('error' in reply) this.settle(job, new ExtractFailedError(reply.error));
      else this.settle(job, undefined, { title: reply.title, text: reply.text });
      this.idle(slot);
      this.dispatch();
    });
    worker.on('error', (err) => this.lost(slot, new ExtractFailedError(describeDeath(err))));
    worker.on('exit', () => this.lost(slot, new ExtractFailedError('the extraction worker exited')));
    return slot;
  }

  private startClock(slot: Slot, job: Job): void {
    job.timer = setTimeout(() => {
      if (slot.job === job) void this.kill(slot, new ExtractTimeoutError(this.options.timeoutMs));
    }, this.options.timeoutMs);
  }

  private idle(slot: Slot): void {
    slot.worker.unref();
    slot.idleTimer = setTimeout(() => void this.kill(slot), this.options.idleMs);
    slot.idleTimer.unref();
  }

  /** The caller gave up: drop the page from the queue, or stop the worker parsing it. */
  private abort(job: Job): void {
    const queued = this.queue.indexOf(job);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      this.settle(job, job.signal.reason);
      return;
    }
    for (const slot of this.slots) if (slot.job === job) void this.kill(slot, job.signal.reason);
  }

  /** Terminates a worker, failing its page with `reason`, and lets the queue move on. */
  private async kill(slot: Slot, reason?: unknown): Promise<void> {
    if (!this.slots.delete(slot)) return;
    clearTimeout(slot.idleTimer);
    const job = slot.job;
    slot.job = null;
    if (job) this.settle(job, reason ?? new ExtractFailedError('the extraction worker stopped'));
    this.dispatch();
    await slot.worker.terminate();
  }

  /** A worker died by itself (heap cap, crash). */
  private lost(slot: Slot, err: Error): void {
    if (!this.slots.has(slot)) return;
    void this.kill(slot, err);
  }

  private settle(job: Job, err: unknown, value?: Extracted): void {
    clearTimeout(job.timer);
    job.signal.removeEventListener('abort', job.onAbort);
    if (err !== undefined) job.reject(err as Error);
    else job.resolve(value as Extracted);
  }
}

function describeDeath(err: Error): string {
  const code = (err as { code?: string }).code;
  if (code === 'ERR_WORKER_OUT_OF_MEMORY') return 'the page needed more memory than the extraction worker may use';
  return `the extraction worker failed: ${err.message}`;
}
