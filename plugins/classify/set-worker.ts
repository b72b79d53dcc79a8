/**
 * The classifier set's worker thread: classifies a long text with the set's classifiers that
 * answer at once (Classifier.offLoop), rebuilt here from their module and spec, so that a scan
 * that grows with the text (the pattern detectors: ~0.1 s for a 4 MiB prompt) does not hold the
 * event loop. A classifier is built once per spec and kept.
 */
import { parentPort } from 'node:worker_threads';
// This one module, not runtime/index.ts: a worker thread should not load the whole runtime.
import { compiledModule } from '../../runtime/util/typescript-worker.ts';
import type { Classifier, ClassifierResult, ClassifyOptions, OffLoopSpec } from './api.ts';
import type { LongTextJob, LongTextReply } from './long-text-worker.ts';
import { type PackedResult, packResult } from './packed-results.ts';

export interface SetWorkerJob {
  classifiers: OffLoopSpec[];
  options?: ClassifyOptions;
}

const built = new Map<string, Promise<Classifier>>();

function classifierFor(spec: OffLoopSpec): Promise<Classifier> {
  const key = `${spec.module}\0${JSON.stringify(spec.spec)}`;
  let made = built.get(key);
  if (!made) {
    // The compiled .js where the build put one beside the .ts (dist/).
    made = import(compiledModule(spec.module) ?? spec.module).then(
      (m: { createOffLoop?: (spec: unknown) => Classifier }) => {
        if (typeof m.createOffLoop !== 'function') throw new Error(`${spec.module} exports no createOffLoop`);
        const c = m.createOffLoop(spec.spec);
        if (!c.classifySync) throw new Error(`${spec.module}: the classifier it builds does not answer at once`);
        return c;
      },
    );
    made.catch(() => built.delete(key));
    built.set(key, made);
  }
  return made;
}

async function classifyAll(text: string, job: SetWorkerJob): Promise<PackedResult[]> {
  const classifiers = await Promise.all(job.classifiers.map(classifierFor));
  return classifiers.map((c) =>
    packResult((c.classifySync as (t: string, o?: ClassifyOptions) => ClassifierResult)(text, job.options)),
  );
}

parentPort?.on('message', (message: LongTextJob) => {
  classifyAll(message.text, message.job as SetWorkerJob).then(
    (result) => {
      // The span arrays are handed over, not copied.
      const transfer = result.flatMap((r) => [r.bounds.buffer as ArrayBuffer, r.labelOf.buffer as ArrayBuffer]);
      parentPort?.postMessage({ id: message.id, result } satisfies LongTextReply<PackedResult[]>, transfer);
    },
    (err: Error) =>
      parentPort?.postMessage({ id: message.id, error: err?.message ?? String(err) } satisfies LongTextReply<never>),
  );
});
