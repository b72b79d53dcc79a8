/**
 * One onnxruntime-node session per model, created at load with the same options everywhere (the
 * benchmark uses them too). One intra-op thread by default: session.run occupies the calling
 * thread anyway, a gateway gets its parallelism from concurrent requests, and on small models
 * extra spinning threads cost more than they give (measured in bench/classify-ml).
 */
import * as ort from 'onnxruntime-node';

export const DEFAULT_INTRA_OP_THREADS = 1;

export function sessionOptions(intraOpThreads = DEFAULT_INTRA_OP_THREADS): ort.InferenceSession.SessionOptions {
  return { executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: intraOpThreads };
}

export async function createSession(file: string, intraOpThreads?: number): Promise<ort.InferenceSession> {
  try {
    return await ort.InferenceSession.create(file, sessionOptions(intraOpThreads));
  } catch (err) {
    throw new Error(`cannot load ONNX model ${file}: ${(err as Error).message}`);
  }
}

export { ort };
