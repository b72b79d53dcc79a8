/**
 * Work that requests queue during one turn of the event loop, run together at the end of the
 * turn (setImmediate). Under load one turn reads many requests (measured on the safety filter at
 * 32 connections: ~10 per turn); running the same CPU-bound step for all of them in a row keeps
 * its code, tables and branch history hot, where one request at a time runs it cold between the
 * HTTP, JSON and socket code of the others. A lone request waits only for the end of its turn.
 *
 * The run is synchronous: it gets the inputs in the order they were queued and returns an output
 * for each; `fail(i, reason)` rejects input i instead, and a throw rejects the whole batch. Async
 * work (a model) batches differently: see plugins/classify/ml/batcher.ts.
 */

type Run<I, O> = (inputs: readonly I[], fail: (index: number, reason: unknown) => void) => O[];

export class TurnBatch<I, O> {
  #inputs: I[] = [];
  #waiting: Array<{ resolve: (output: O) => void; reject: (reason: unknown) => void }> = [];
  readonly #run: Run<I, O>;
  readonly #flush = (): void => {
    const inputs = this.#inputs;
    const waiting = this.#waiting;
    this.#inputs = [];
    this.#waiting = [];
    let failed: Map<number, unknown> | undefined; // made only when an input fails
    let outputs: O[];
    try {
      outputs = this.#run(inputs, (i, reason) => {
        failed ??= new Map();
        failed.set(i, reason);
      });
    } catch (err) {
      for (const w of waiting) w.reject(err);
      return;
    }
    for (let i = 0; i < waiting.length; i++) {
      if (failed?.has(i)) waiting[i].reject(failed.get(i));
      else waiting[i].resolve(outputs[i]);
    }
  };

  constructor(run: Run<I, O>) {
    this.#run = run;
  }

  /** Queues `input` for the run at the end of this turn of the event loop. */
  add(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.#inputs.length === 0) setImmediate(this.#flush);
      this.#inputs.push(input);
      this.#waiting.push({ resolve, reject });
    });
  }
}
