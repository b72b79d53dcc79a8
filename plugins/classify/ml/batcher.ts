/**
 * Coalesces concurrent requests into batches: a request that arrives while the model is busy
 * waits and goes into the next run together with the others that arrived meanwhile (up to
 * `maxBatch`). A lone request runs at once, so sequential callers pay no waiting.
 * It also keeps runs of one model strictly one at a time, which lets classifiers reuse buffers.
 */
interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (reason: unknown) => void;
}

export class Batcher<I, O> {
  private readonly queue: Pending<I, O>[] = [];
  private running = false;

  constructor(
    private readonly maxBatch: number,
    private readonly run: (items: I[]) => Promise<O[]>,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.running) {
        this.running = true;
        // Start after the current synchronous burst so items submitted together share a run.
        queueMicrotask(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const results = await this.run(batch.map((p) => p.item));
        batch.forEach((p, i) => {
          p.resolve(results[i]);
        });
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    this.running = false;
  }
}
