/**
 * One loaded embedding model: its tokenizer (tokenizer.json via @huggingface/tokenizers) on the
 * main thread, its sessions in a worker pool. A request's texts are tokenised, sorted by length
 * (so a batch holds texts of similar length and little padding), cut into batches of
 * `batchSize` padded to their longest text, run on the pool in parallel, and put back in order.
 */
import { setImmediate } from 'node:timers/promises';
import { Tokenizer } from '@huggingface/tokenizers';
import { type MemoizableModel, memoizeWordEncoding } from '../../lib/tokenizers/word-memo.ts';
import type { InputType, ModelCard } from './api.ts';
import { type ModelFiles, readJsonFile } from './model-files.ts';
import { type Batch, SessionPool } from './session-pool.ts';
import { type TextTokenizer, TokenEncoder } from './token-encoder.ts';

/** Texts tokenised before the event loop gets a turn. */
const TOKENIZE_SLICE = 64;

export interface ModelRunOptions {
  poolSize: number;
  intraOpThreads: number;
  batchSize: number;
  /** Upper bound on tokens per text, whatever the card says. */
  maxLength?: number;
}

export class EmbeddingModel {
  private constructor(
    readonly card: ModelCard,
    readonly encoder: TokenEncoder,
    private readonly pool: SessionPool,
    private readonly padId: bigint,
    private readonly batchSize: number,
  ) {}

  static async load(card: ModelCard, files: ModelFiles, options: ModelRunOptions): Promise<EmbeddingModel> {
    const tokenizerConfig = files.tokenizerConfig ? readJsonFile(files.tokenizerConfig) : {};
    const config = files.config ? readJsonFile(files.config) : {};
    const tokenizer = new Tokenizer(readJsonFile(files.tokenizer), tokenizerConfig) as unknown as TextTokenizer & {
      model: MemoizableModel | null;
    };
    memoizeWordEncoding(tokenizer.model);
    const maxLength = Math.min(
      card.maxLength,
      options.maxLength ?? Number.POSITIVE_INFINITY,
      positive(tokenizerConfig.model_max_length) ?? Number.POSITIVE_INFINITY,
    );
    const encoder = new TokenEncoder(tokenizer, card, maxLength);
    const padToken = tokenizerConfig.pad_token;
    const padName =
      typeof padToken === 'object' && padToken !== null ? (padToken as { content?: string }).content : padToken;
    const padId =
      (typeof padName === 'string' ? tokenizer.token_to_id(padName) : undefined) ??
      (typeof config.pad_token_id === 'number' ? config.pad_token_id : 0);

    const pool = await SessionPool.open(
      { file: files.model, intraOpThreads: options.intraOpThreads, pooling: card.pooling, normalize: card.normalize },
      options.poolSize,
    );
    const model = new EmbeddingModel(card, encoder, pool, BigInt(padId), options.batchSize);
    try {
      // A probe run: a graph that is not this card's model fails here, not on a user's request.
      const [probe] = await model.embedIds([encoder.encode('probe')]);
      if (probe.length !== card.dimension) {
        throw new Error(
          `${files.model} gives ${probe.length}-dimensional vectors; model ${card.name} has ${card.dimension}`,
        );
      }
    } catch (err) {
      await pool.close();
      throw err;
    }
    return model;
  }

  async embed(texts: string[], inputType: InputType = 'passage'): Promise<number[][]> {
    const ids: number[][] = [];
    for (let i = 0; i < texts.length; i++) {
      // Tokenising runs on the main thread: let other requests in between slices of a long list.
      if (i > 0 && i % TOKENIZE_SLICE === 0) await setImmediate();
      ids.push(this.encoder.encode(texts[i], inputType));
    }
    return this.embedIds(ids);
  }

  /** Vectors for already tokenised texts (special tokens included), in order. */
  async embedIds(ids: number[][]): Promise<number[][]> {
    const order = ids.map((_, i) => i).sort((a, b) => ids[a].length - ids[b].length);
    const runs: Promise<void>[] = [];
    const out = new Array<number[]>(ids.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      const members = order.slice(start, start + this.batchSize);
      runs.push(
        this.pool.run(this.batch(members.map((i) => ids[i]))).then(({ vectors, dim }) => {
          members.forEach((index, row) => {
            out[index] = Array.from(vectors.subarray(row * dim, (row + 1) * dim));
          });
        }),
      );
    }
    await Promise.all(runs);
    return out;
  }

  /** Inputs of one run: ids padded to the longest sequence, attention mask 1 on real tokens. */
  private batch(sequences: number[][]): Batch {
    let length = 0;
    for (const s of sequences) length = Math.max(length, s.length);
    const ids = new BigInt64Array(sequences.length * length).fill(this.padId);
    const mask = new BigInt64Array(sequences.length * length);
    sequences.forEach((sequence, b) => {
      for (let t = 0; t < sequence.length; t++) {
        ids[b * length + t] = BigInt(sequence[t]);
        mask[b * length + t] = 1n;
      }
    });
    return { ids, mask, batch: sequences.length, length };
  }

  get inputs(): string[] {
    return this.pool.info.inputs;
  }

  trim(): void {
    this.pool.trim();
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** A usable model_max_length (tokenizer configs write 1e30 for "no limit"). */
function positive(value: unknown): number | undefined {
  return typeof value === 'number' && value > 0 && value < 1e6 ? value : undefined;
}
