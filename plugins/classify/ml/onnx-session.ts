/**
 * One onnxruntime-node session per model, created at load with the same options everywhere (the
 * benchmark uses them too). One intra-op thread by default: session.run occupies the calling
 * thread anyway, a gateway gets its parallelism from concurrent requests, and on small models
 * extra spinning threads cost more than they give (measured in bench/classify-ml).
 *
 * onnxruntime-node (~290 MB) is an optional dependency, loaded the first time a config uses a
 * model: a service without `type: ml` classifiers starts without it, and an install may omit it.
 */
import type * as Ort from 'onnxruntime-node';

export const DEFAULT_INTRA_OP_THREADS = 1;

export type { Ort };

let loading: Promise<typeof Ort> | undefined;

/** The onnxruntime-node module, or an error saying how to install it. */
export function loadOrt(): Promise<typeof Ort> {
  loading ??= import('onnxruntime-node').then(
    (m) => m as unknown as typeof Ort,
    (err: Error) => {
      loading = undefined;
      throw new Error(
        `onnxruntime-node is not installed (an optional dependency that ML classifiers and embedding models need: npm install onnxruntime-node): ${err.message}`,
      );
    },
  );
  return loading;
}

export function sessionOptions(intraOpThreads = DEFAULT_INTRA_OP_THREADS): Ort.InferenceSession.SessionOptions {
  return { executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: intraOpThreads };
}

export async function createSession(file: string, intraOpThreads?: number): Promise<Ort.InferenceSession> {
  const ort = await loadOrt();
  try {
    return await ort.InferenceSession.create(file, sessionOptions(intraOpThreads));
  } catch (err) {
    throw new Error(`cannot load ONNX model ${file}: ${(err as Error).message}`);
  }
}
