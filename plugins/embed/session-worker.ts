/**
 * One onnxruntime session in a worker thread. onnxruntime-node runs `session.run` on the calling
 * thread (its promise only defers the call), so a model run on the main thread would stall every
 * other request of the service; in workers, runs leave the event loop free and several sessions
 * of a pool run in parallel on several cores.
 *
 * Protocol: the worker answers `{type: 'ready', inputs, output}` once the session is created (or
 * `{type: 'failed', error}`), then one `RunReply` per `RunRequest`: the pooled (and normalised)
 * vectors, [batch, dim] row-major, so only batch × dim floats cross back. `{type: 'collect'}`
 * (the service went idle, see SessionPool.trim) asks the worker to collect its heap: its garbage
 * holds the output tensors of every batch it ran, which V8 does not collect in an idle thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type * as Ort from 'onnxruntime-node';
// This one module, not runtime/index.ts: a worker thread should not load the whole runtime.
import { garbageCollector } from '../../runtime/util/collect-garbage.ts';
import type { Pooling } from './api.ts';
import { normalizeRows, pool } from './pooling.ts';

export interface WorkerConfig {
  file: string;
  intraOpThreads: number;
  pooling: Pooling;
  normalize: boolean;
}

export interface RunRequest {
  id: number;
  ids: BigInt64Array;
  mask: BigInt64Array;
  batch: number;
  length: number;
}

/** Sent to an idle worker when the service trims its memory; no answer. */
export interface CollectRequest {
  type: 'collect';
}

export type RunReply = { id: number; vectors: Float32Array; dim: number } | { id: number; error: string };

export type WorkerHello = { type: 'ready'; inputs: string[]; output: string } | { type: 'failed'; error: string };

const KNOWN_INPUTS = new Set(['input_ids', 'attention_mask', 'token_type_ids', 'position_ids']);
/** Token-level outputs first (pooled here), then an already pooled one. */
const OUTPUT_PREFERENCE = ['last_hidden_state', 'token_embeddings', 'sentence_embedding'];

async function start(config: WorkerConfig): Promise<void> {
  const port = parentPort!;
  let ort: typeof Ort;
  try {
    // Optional dependency (~290 MB): loaded only where a model is used.
    ort = (await import('onnxruntime-node')) as typeof Ort;
  } catch (err) {
    const message = `onnxruntime-node is not installed (an optional dependency that embedding models need: npm install onnxruntime-node): ${(err as Error).message}`;
    port.postMessage({ type: 'failed', error: message });
    return;
  }
  let session: Ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(config.file, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: config.intraOpThreads,
      interOpNumThreads: 1,
    });
  } catch (err) {
    port.postMessage({ type: 'failed', error: `cannot load ONNX model ${config.file}: ${(err as Error).message}` });
    return;
  }
  const inputs = [...session.inputNames];
  const unknown = inputs.filter((name) => !KNOWN_INPUTS.has(name));
  if (!inputs.includes('input_ids') || unknown.length > 0) {
    port.postMessage({
      type: 'failed',
      error: `${config.file}: inputs ${JSON.stringify(inputs)} are not those of a text encoder (input_ids, attention_mask, token_type_ids)`,
    });
    return;
  }
  const output = OUTPUT_PREFERENCE.find((name) => session.outputNames.includes(name)) ?? session.outputNames[0];
  port.postMessage({ type: 'ready', inputs, output } satisfies WorkerHello);

  port.on('message', async (request: RunRequest | CollectRequest) => {
    if ('type' in request) {
      await garbageCollector()?.({ type: 'major', execution: 'async' });
      return;
    }
    try {
      const { vectors, dim } = await run(ort, session, inputs, output, config, request);
      port.postMessage({ id: request.id, vectors, dim } satisfies RunReply, [vectors.buffer as ArrayBuffer]);
    } catch (err) {
      port.postMessage({ id: request.id, error: (err as Error).message } satisfies RunReply);
    }
  });
}

async function run(
  ort: typeof Ort,
  session: Ort.InferenceSession,
  inputs: string[],
  output: string,
  config: WorkerConfig,
  { ids, mask, batch, length }: RunRequest,
): Promise<{ vectors: Float32Array; dim: number }> {
  const dims = [batch, length];
  const feeds: Record<string, Ort.Tensor> = {};
  for (const name of inputs) {
    if (name === 'input_ids') feeds[name] = new ort.Tensor('int64', ids, dims);
    else if (name === 'attention_mask') feeds[name] = new ort.Tensor('int64', mask, dims);
    else if (name === 'token_type_ids') feeds[name] = new ort.Tensor('int64', new BigInt64Array(ids.length), dims);
    else feeds[name] = new ort.Tensor('int64', positionIds(batch, length), dims);
  }
  const result = (await session.run(feeds, [output]))[output];
  const data = result.data as Float32Array;
  let vectors: Float32Array;
  let dim: number;
  if (result.dims.length === 3 && result.dims[0] === batch && result.dims[1] === length) {
    dim = result.dims[2];
    vectors = pool(data, mask, batch, length, dim, config.pooling);
  } else if (result.dims.length === 2 && result.dims[0] === batch) {
    dim = result.dims[1];
    vectors = Float32Array.from(data);
  } else {
    throw new Error(`model output ${output} has shape [${result.dims}], expected [${batch}, ${length}, dim]`);
  }
  return { vectors: config.normalize ? normalizeRows(vectors, dim) : vectors, dim };
}

function positionIds(batch: number, length: number): BigInt64Array {
  const out = new BigInt64Array(batch * length);
  for (let b = 0; b < batch; b++) for (let t = 0; t < length; t++) out[b * length + t] = BigInt(t);
  return out;
}

if (parentPort && workerData) void start(workerData as WorkerConfig);
