/**
 * `format: hf-sequence-classification` — a Hugging Face sequence-classification model exported to
 * ONNX, as found on the Hub (Prompt-Guard style): model.onnx (or onnx/model.onnx), tokenizer.json,
 * config.json with id2label, optionally tokenizer_config.json. Tokenised with @huggingface/tokenizers;
 * the session gets those of input_ids / attention_mask / token_type_ids / position_ids it declares
 * (int64, padded to the longest text of the batch); label = id2label[argmax softmax(logits)].
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import type { Logger } from 'pino';
import { type MemoizableModel, memoizeWordEncoding } from '../../../lib/tokenizers/word-memo.ts';
import { ModelClassifier } from './model-classifier.ts';
import { modelDirectory, readJson, requireFile } from './model-files.ts';
import { createSession, loadOrt, type Ort } from './onnx-session.ts';
import {
  combineWindows,
  labelIndices,
  type Prediction,
  predictionFromProbabilities,
  softmaxRow,
} from './probabilities.ts';
import { type TextTokenizer, TokenWindows } from './token-windows.ts';

export interface HfSequenceOptions {
  model: string;
  positiveLabels?: string[];
  threshold: number;
  maxLength?: number;
  longText: 'chunks' | 'truncate';
  maxChunks: number;
  batchSize: number;
  intraOpThreads?: number;
}

const KNOWN_INPUTS = new Set(['input_ids', 'attention_mask', 'token_type_ids', 'position_ids']);
const DEFAULT_MAX_LENGTH = 512;

interface ModelConfig {
  id2label?: Record<string, string>;
  max_position_embeddings?: number;
  pad_token_id?: number;
}

interface TokenizerConfig {
  model_max_length?: number;
  pad_token?: string | { content: string };
}

export class HfSequenceClassifier extends ModelClassifier {
  private session: Ort.InferenceSession | undefined;
  /** The runtime's module, once a session is loaded (tensors are made with it). */
  private ort: typeof Ort | undefined;
  private windows: TokenWindows | undefined;
  private labels: string[] = [];
  private positive: Set<number> | null = null;
  private outputName = 'logits';
  private inputs: readonly string[] = [];
  private padId = 0;
  private buffers = { ids: new BigInt64Array(0), mask: new BigInt64Array(0), zeros: new BigInt64Array(0) };

  constructor(
    name: string,
    private readonly options: HfSequenceOptions,
    private readonly modelsDir: string,
    logger: Logger,
  ) {
    super(name, options.model, logger, options.batchSize);
  }

  protected async open(): Promise<void> {
    const dir = modelDirectory(this.modelsDir, this.options.model);
    const modelFile = requireFile(dir, ['model.onnx', 'onnx/model.onnx'], 'ONNX model');
    const tokenizerJson = readJson(requireFile(dir, ['tokenizer.json'], 'tokenizer'));
    const config = readJson(requireFile(dir, ['config.json'], 'model config (id2label)')) as ModelConfig;
    const tokenizerConfigFile = join(dir, 'tokenizer_config.json');
    const tokenizerConfig = (existsSync(tokenizerConfigFile) ? readJson(tokenizerConfigFile) : {}) as TokenizerConfig;

    const id2label = config.id2label ?? {};
    this.labels = Object.keys(id2label)
      .sort((a, b) => Number(a) - Number(b))
      .map((id) => id2label[id]);
    if (this.labels.length < 2) throw new Error(`${join(dir, 'config.json')}: id2label must name at least two labels`);
    this.positive = labelIndices(this.options.positiveLabels, this.labels, `model "${this.options.model}"`);

    const tokenizer = new Tokenizer(tokenizerJson as object, tokenizerConfig) as TextTokenizer & {
      model: MemoizableModel | null;
    };
    memoizeWordEncoding(tokenizer.model);
    const padToken =
      typeof tokenizerConfig.pad_token === 'object' ? tokenizerConfig.pad_token.content : tokenizerConfig.pad_token;
    this.padId = (padToken !== undefined ? tokenizer.token_to_id(padToken) : undefined) ?? config.pad_token_id ?? 0;
    const modelMax =
      tokenizerConfig.model_max_length !== undefined && tokenizerConfig.model_max_length < 1e6
        ? tokenizerConfig.model_max_length
        : (config.max_position_embeddings ?? DEFAULT_MAX_LENGTH);
    this.windows = new TokenWindows(tokenizer, {
      maxLength: Math.min(this.options.maxLength ?? modelMax, modelMax),
      longText: this.options.longText,
      maxChunks: this.options.maxChunks,
    });

    const session = await createSession(modelFile, this.options.intraOpThreads);
    this.ort = await loadOrt();
    const unknown = session.inputNames.filter((n) => !KNOWN_INPUTS.has(n));
    if (!session.inputNames.includes('input_ids') || unknown.length > 0) {
      await session.release();
      throw new Error(
        `${modelFile}: inputs ${JSON.stringify(session.inputNames)} are not those of a sequence-classification export (input_ids, attention_mask, token_type_ids)`,
      );
    }
    this.inputs = [...session.inputNames];
    this.outputName = session.outputNames.includes('logits') ? 'logits' : session.outputNames[0];
    this.session = session;
  }

  protected async predict(texts: string[]): Promise<Prediction[]> {
    const encoded = texts.map((text) => this.windows!.encode(text));
    const all = encoded.flatMap((e) => e.windows);
    const probs: number[][] = [];
    for (let i = 0; i < all.length; i += this.options.batchSize) {
      probs.push(...(await this.run(all.slice(i, i + this.options.batchSize))));
    }
    let next = 0;
    return encoded.map((e) => {
      const rows = probs.slice(next, next + e.windows.length);
      next += e.windows.length;
      const prediction = predictionFromProbabilities(
        combineWindows(rows, this.positive),
        this.labels,
        this.positive,
        this.options.threshold,
      );
      prediction.detail = {
        ...prediction.detail,
        tokens: e.tokens,
        ...(e.windows.length > 1 ? { windows: e.windows.length } : {}),
        ...(e.truncated ? { truncated: true } : {}),
      };
      return prediction;
    });
  }

  /** One session run over windows padded to the longest; returns one probability row per window. */
  private async run(windows: number[][]): Promise<number[][]> {
    if (!this.session) throw new Error('classifier is closed');
    const batch = windows.length;
    let length = 0;
    for (const w of windows) length = Math.max(length, w.length);
    const size = batch * length;
    const { ids, mask, zeros } = this.inputBuffers(size);
    ids.fill(BigInt(this.padId));
    mask.fill(0n);
    for (let b = 0; b < batch; b++) {
      const w = windows[b];
      for (let t = 0; t < w.length; t++) {
        ids[b * length + t] = BigInt(w[t]);
        mask[b * length + t] = 1n;
      }
    }
    const dims = [batch, length];
    const feeds: Record<string, Ort.Tensor> = {};
    for (const name of this.inputs) {
      if (name === 'input_ids') feeds[name] = new (this.ort as typeof Ort).Tensor('int64', ids, dims);
      else if (name === 'attention_mask') feeds[name] = new (this.ort as typeof Ort).Tensor('int64', mask, dims);
      else if (name === 'token_type_ids') feeds[name] = new (this.ort as typeof Ort).Tensor('int64', zeros, dims);
      else feeds[name] = new (this.ort as typeof Ort).Tensor('int64', positionIds(batch, length), dims);
    }
    const output = (await this.session.run(feeds, [this.outputName]))[this.outputName];
    const width = output.dims[output.dims.length - 1];
    if (output.dims.length !== 2 || output.dims[0] !== batch || width !== this.labels.length) {
      throw new Error(
        `model output ${this.outputName} has shape [${output.dims}], expected [${batch}, ${this.labels.length}]`,
      );
    }
    const logits = output.data as Float32Array;
    return windows.map((_, row) => softmaxRow(logits, row, width));
  }

  /** Input arrays reused from run to run (runs never overlap, see Batcher), as views of `size` elements. */
  private inputBuffers(size: number): { ids: BigInt64Array; mask: BigInt64Array; zeros: BigInt64Array } {
    if (this.buffers.ids.length < size) {
      this.buffers = { ids: new BigInt64Array(size), mask: new BigInt64Array(size), zeros: new BigInt64Array(size) };
    }
    const { ids, mask, zeros } = this.buffers;
    return { ids: ids.subarray(0, size), mask: mask.subarray(0, size), zeros: zeros.subarray(0, size) };
  }

  protected override async release(): Promise<void> {
    await this.session?.release();
    this.session = undefined;
  }
}

function positionIds(batch: number, length: number): BigInt64Array {
  const out = new BigInt64Array(batch * length);
  for (let b = 0; b < batch; b++) for (let t = 0; t < length; t++) out[b * length + t] = BigInt(t);
  return out;
}
