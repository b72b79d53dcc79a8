/**
 * The linear-features model's worker thread: the sparse dot product of a long text
 * (LongTextWorker sends it there), whose feature extraction grows with the text (~0.14 ms
 * per KiB: a 4 MiB prompt took 0.57 s) and must not hold the event loop. The same code as the
 * main thread's (FeatureExtractor.dot), so the same logits.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { LongTextJob, LongTextReply } from '../long-text-worker.ts';
import { FeatureExtractor, type FeatureScheme } from './features.ts';

export interface LinearWorkerData {
  scheme: FeatureScheme;
  /** W, row-major [width, classes], and b (onnx-linear.ts). */
  weights: Float32Array;
  bias: Float32Array;
  classes: number;
}

const data = workerData as LinearWorkerData;
const extractor = new FeatureExtractor(data.scheme);

parentPort?.on('message', (job: LongTextJob) => {
  try {
    const logits = Float64Array.from(data.bias);
    extractor.dot(job.text, data.weights, data.classes, logits);
    parentPort?.postMessage({ id: job.id, result: logits } satisfies LongTextReply<Float64Array>);
  } catch (err) {
    parentPort?.postMessage({ id: job.id, error: (err as Error).message } satisfies LongTextReply<Float64Array>);
  }
});
