/**
 * A pool of session workers for one model (session-worker.ts): `size` worker threads, each with
 * its own onnxruntime session, each running one batch at a time. Batches queue in arrival order
 * and go to the first idle worker. A worker that dies fails its batch and is replaced on the next
 * run. Memory: every worker holds a copy of the model's weights.
 */
import type { Worker } from 'node:worker_threads';
import { startTypeScriptWorker } from '../../runtime/index.ts';
import type { CollectRequest, RunReply, RunRequest, WorkerConfig, WorkerHello } from './session-worker.ts';

const WORKER_MODULE = new URL('./session-worker.ts', import.meta.url);

export interface Batch {
  ids: BigInt64Array;
  mask: BigInt64Array;
  batch: number;
  length: number;
}

interface Job {
  request: Batch;
  resolve: (vectors: { vectors: Float32Array; dim: number }) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  busy: Job | null;
}

export class SessionPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 0;
  private closed = false;
  /** Replacements of dead workers being started. */
  private spawning = 0;
  /** The graph's inputs and the output read, as the first worker reported them. */
  info: { inputs: string[]; output: string } = { inputs: [], output: '' };

  private constructor(
    private readonly config: WorkerConfig,
    private readonly size: number,
  ) {}

  /** Starts the workers; rejects (with the first load error) if a session cannot be created. */
  static async open(config: WorkerConfig, size: number): Promise<SessionPool> {
    const pool = new SessionPool(config, size);
    try {
      await Promise.all(Array.from({ length: size }, () => pool.spawn()));
    } catch (err) {
      await pool.close();
      throw err;
    }
    return pool;
  }

  run(request: Batch): Promise<{ vectors: Float32Array; dim: number }> {
    if (this.closed) return Promise.reject(new Error('session pool is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.dispatch();
    });
  }

  /** Asks the idle workers to collect their heaps (the service is idle: see trimMemory in runtime/plugin.ts). */
  trim(): void {
    for (const slot of this.slots)
      if (!slot.busy) slot.worker.postMessage({ type: 'collect' } satisfies CollectRequest);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error('session pool is closed'));
    await Promise.all(this.slots.splice(0).map((slot) => slot.worker.terminate()));
  }

  private async spawn(): Promise<Slot> {
    const worker = startTypeScriptWorker(WORKER_MODULE, { workerData: this.config });
    const hello = await new Promise<WorkerHello>((resolve, reject) => {
      const onExit = (code: number) => reject(new Error(`session worker exited (code ${code}) before it was ready`));
      worker.once('message', (message: WorkerHello) => {
        worker.off('error', reject);
        worker.off('exit', onExit);
        resolve(message);
      });
      // Only these listeners: Worker keeps internal ones (removeAllListeners would stop its messages).
      worker.once('error', reject);
      worker.once('exit', onExit);
    });
    if (hello.type === 'failed') {
      await worker.terminate();
      throw new Error(hello.error);
    }
    this.info = { inputs: hello.inputs, output: hello.output };
    const slot: Slot = { worker, busy: null };
    worker.on('message', (reply: RunReply) => this.settle(slot, reply));
    const lost = (err: Error) => {
      const index = this.slots.indexOf(slot);
      if (index >= 0) this.slots.splice(index, 1);
      slot.busy?.reject(err);
      slot.busy = null;
      this.dispatch();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`session worker exited (code ${code})`)));
    if (this.closed) {
      await worker.terminate();
      throw new Error('session pool is closed');
    }
    this.slots.push(slot);
    return slot;
  }

  private settle(slot: Slot, reply: RunReply): void {
    const job = slot.busy;
    slot.busy = null;
    if (job) {
      if ('error' in reply) job.reject(new Error(reply.error));
      else job.resolve({ vectors: reply.vectors, dim: reply.dim });
    }
    this.dispatch();
  }

  private dispatch(): void {
    if (this.closed) return;
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.busy) continue;
      const job = this.queue.shift()!;
      slot.busy = job;
      const { ids, mask, batch, length } = job.request;
      // Transfer, not copy: the main thread does not read the inputs again.
      const message: RunRequest = { id: this.nextId++, ids, mask, batch, length };
      slot.worker.postMessage(message, [ids.buffer as ArrayBuffer, mask.buffer as ArrayBuffer]);
    }
    // Replace dead workers while work is waiting.
    if (this.queue.length > 0 && this.slots.length + this.spawning < this.size) {
      this.spawning++;
      this.spawn()
        .catch((err: Error) => {
          for (const job of this.queue.splice(0)) job.reject(err);
        })
        .finally(() => {
          this.spawning--;
          this.dispatch();
        });
    }
  }
}
