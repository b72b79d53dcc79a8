/**
 * Generates a tiny BERT-shaped ONNX model with random weights (fixed seed) plus the files a
 * Hugging Face model directory has: model.onnx, config.json, tokenizer.json, tokenizer_config.json.
 * The tokenizer is the real bert-base-uncased WordPiece vocabulary (see bert-vocab.ts), so the
 * model accepts real text; its outputs are meaningless (random weights), its shapes and graph are
 * those of a BERT export.
 *
 *   npx tsx scripts/models/generate-tiny-bert.ts --out DIR [--task sequence-classification|feature-extraction]
 *       [--layers 2] [--hidden 64] [--heads 4] [--intermediate 4*hidden] [--max-positions 512]
 *       [--labels BENIGN,INJECTION] [--seed 42] [--init-std 0.2] [--no-token-type-ids]
 *       [--tokenizer wordpiece|unigram]
 *
 * Graph (opset 17): word + position + token-type embeddings → LayerNorm → N encoder layers
 * (multi-head self-attention with the additive attention mask, residual + LayerNorm, GELU (erf)
 * feed-forward, residual + LayerNorm) → either `last_hidden_state` [batch, sequence, hidden]
 * (feature-extraction) or pooler (tanh dense on [CLS]) → classifier → `logits` [batch, labels].
 * Dense weights are stored [in, out] (ready for MatMul) under Hugging Face parameter names.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bertBaseUncasedTokenizer, bertBaseUncasedVocab, unigramTokenizer } from './bert-vocab.ts';
import { FLOAT, GraphBuilder, INT64 } from './onnx-graph.ts';
import { SeededRandom } from './seeded-random.ts';

export type TinyBertTask = 'sequence-classification' | 'feature-extraction';

export interface TinyBertOptions {
  task: TinyBertTask;
  layers: number;
  hidden: number;
  heads: number;
  /** Feed-forward width; 4 × hidden by default, as in BERT. */
  intermediate?: number;
  maxPositions: number;
  /** Classification labels (id order); sequence-classification only. */
  labels: string[];
  seed: number;
  /** Standard deviation of the random weights. Larger than BERT's 0.02 so outputs differ visibly between inputs. */
  initStd: number;
  /** Whether the graph declares a `token_type_ids` input (some exports do not). */
  tokenTypeIds: boolean;
  /**
   * `wordpiece`: bert-base-uncased's tokenizer files. `unigram`: the same pieces as a SentencePiece
   * Unigram tokenizer in the layout of DeBERTa-v3 / Prompt Guard exports (bert-vocab.ts,
   * unigramTokenizer); the graph stays a BERT.
   */
  tokenizer: 'wordpiece' | 'unigram';
}

export const defaultTinyBertOptions: TinyBertOptions = {
  task: 'sequence-classification',
  layers: 2,
  hidden: 64,
  heads: 4,
  maxPositions: 512,
  labels: ['BENIGN', 'INJECTION'],
  seed: 42,
  initStd: 0.2,
  tokenTypeIds: true,
  tokenizer: 'wordpiece',
};

/** Layer-norm epsilon and the additive mask value, as in Hugging Face's BERT. */
export const LAYER_NORM_EPS = 1e-12;
export const MASKED_SCORE = -10000;

/** Writes the model directory and returns its files' paths. */
export function generateTinyBert(
  outDir: string,
  partial: Partial<TinyBertOptions> = {},
): { dir: string; model: string } {
  const options = { ...defaultTinyBertOptions, ...partial };
  const { hidden, heads, layers, task } = options;
  const intermediate = options.intermediate ?? hidden * 4;
  if (hidden % heads !== 0) throw new Error(`hidden (${hidden}) must be a multiple of heads (${heads})`);
  const unigram = options.tokenizer === 'unigram' ? unigramTokenizer() : undefined;
  const vocabSize = unigram?.vocabSize ?? bertBaseUncasedVocab().length;
  const random = new SeededRandom(options.seed);
  const g = new GraphBuilder(`tiny-bert-${task}`);

  const normal = (dims: number[], std = options.initStd) => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = random.normal() * std;
    return data;
  };
  const weight = (name: string, dims: number[]) => g.initializer(name, dims, normal(dims));
  const gamma = (name: string) => {
    const data = normal([hidden], 0.1);
    for (let i = 0; i < hidden; i++) data[i] += 1;
    return g.initializer(name, [hidden], data);
  };
  const int64 = (name: string, dims: number[], values: number[]) =>
    g.initializer(name, dims, BigInt64Array.from(values.map(BigInt)));
  const scalar = (name: string, value: number) => g.initializer(name, [], Float32Array.of(value));

  const dense = (input: string, prefix: string, inDim: number, outDim: number) =>
    g.node('Add', [
      g.node('MatMul', [input, weight(`${prefix}.weight`, [inDim, outDim])]),
      weight(`${prefix}.bias`, [outDim]),
    ]);
  const layerNorm = (input: string, prefix: string) =>
    g.node('LayerNormalization', [input, gamma(`${prefix}.weight`), weight(`${prefix}.bias`, [hidden])], {
      axis: -1,
      epsilon: { float: LAYER_NORM_EPS },
    });

  const inputIds = g.input('input_ids', INT64, ['batch', 'sequence']);
  const attentionMask = g.input('attention_mask', INT64, ['batch', 'sequence']);
  const tokenTypeIds = options.tokenTypeIds ? g.input('token_type_ids', INT64, ['batch', 'sequence']) : null;

  // Embeddings.
  const zero = int64('const.zero', [], [0]);
  const one = int64('const.one', [], [1]);
  const words = g.node('Gather', [weight('bert.embeddings.word_embeddings.weight', [vocabSize, hidden]), inputIds]);
  const sequenceLength = g.node('Gather', [g.node('Shape', [inputIds]), one], { axis: 0 });
  const positionIds = g.node('Range', [zero, sequenceLength, one]);
  const positions = g.node('Gather', [
    weight('bert.embeddings.position_embeddings.weight', [options.maxPositions, hidden]),
    positionIds,
  ]);
  const tokenTypeTable = weight('bert.embeddings.token_type_embeddings.weight', [2, hidden]);
  // Without a token_type_ids input every token is of type 0, as in Hugging Face.
  const tokenTypes = g.node('Gather', [tokenTypeTable, tokenTypeIds ?? zero]);
  let x = layerNorm(g.node('Add', [g.node('Add', [words, positions]), tokenTypes]), 'bert.embeddings.LayerNorm');

  // Additive attention mask: 0 where attended, MASKED_SCORE where padded; shape [batch, 1, 1, sequence].
  const maskFloat = g.node('Cast', [attentionMask], { to: FLOAT });
  const mask4d = g.node('Unsqueeze', [maskFloat, int64('const.mask_axes', [2], [1, 2])]);
  const additiveMask = g.node('Mul', [
    g.node('Sub', [scalar('const.one_f', 1), mask4d]),
    scalar('const.masked_score', MASKED_SCORE),
  ]);

  const headDim = hidden / heads;
  const splitHeads = int64('const.split_heads', [4], [0, 0, heads, headDim]);
  const mergeHeads = int64('const.merge_heads', [3], [0, 0, hidden]);
  const scale = scalar('const.attention_scale', 1 / Math.sqrt(headDim));
  const half = scalar('const.half', 0.5);
  const sqrt2 = scalar('const.sqrt2', Math.SQRT2);
  const oneF = 'const.one_f';

  for (let layer = 0; layer < layers; layer++) {
    const p = `bert.encoder.layer.${layer}`;
    const heads4d = (name: string, perm: number[]) =>
      g.node('Transpose', [g.node('Reshape', [dense(x, `${p}.attention.self.${name}`, hidden, hidden), splitHeads])], {
        perm,
      });
    const q = heads4d('query', [0, 2, 1, 3]);
    const k = heads4d('key', [0, 2, 3, 1]);
    const v = heads4d('value', [0, 2, 1, 3]);
    const scores = g.node('Add', [g.node('Mul', [g.node('MatMul', [q, k]), scale]), additiveMask]);
    const probs = g.node('Softmax', [scores], { axis: -1 });
    const context = g.node('Reshape', [
      g.node('Transpose', [g.node('MatMul', [probs, v])], { perm: [0, 2, 1, 3] }),
      mergeHeads,
    ]);
    const attended = layerNorm(
      g.node('Add', [dense(context, `${p}.attention.output.dense`, hidden, hidden), x]),
      `${p}.attention.output.LayerNorm`,
    );
    const inner = dense(attended, `${p}.intermediate.dense`, hidden, intermediate);
    // GELU, exact (erf) form: 0.5 · x · (1 + erf(x / √2)).
    const gelu = g.node('Mul', [
      g.node('Mul', [inner, half]),
      g.node('Add', [oneF, g.node('Erf', [g.node('Div', [inner, sqrt2])])]),
    ]);
    x = layerNorm(
      g.node('Add', [dense(gelu, `${p}.output.dense`, intermediate, hidden), attended]),
      `${p}.output.LayerNorm`,
    );
  }

  const config: Record<string, unknown> = {
    architectures: [task === 'sequence-classification' ? 'BertForSequenceClassification' : 'BertModel'],
    model_type: 'bert',
    vocab_size: vocabSize,
    hidden_size: hidden,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    intermediate_size: intermediate,
    hidden_act: 'gelu',
    max_position_embeddings: options.maxPositions,
    type_vocab_size: 2,
    layer_norm_eps: LAYER_NORM_EPS,
    pad_token_id: 0,
    ...(unigram ? { type_vocab_size: options.tokenTypeIds ? 2 : 0 } : {}),
    _generator: { script: 'scripts/models/generate-tiny-bert.ts', seed: options.seed, init_std: options.initStd },
  };

  if (task === 'feature-extraction') {
    g.node('Identity', [x], {}, 'last_hidden_state');
    g.output('last_hidden_state', FLOAT, ['batch', 'sequence', hidden]);
  } else {
    const cls = g.node('Gather', [x, zero], { axis: 1 });
    const pooled = g.node('Tanh', [dense(cls, 'bert.pooler.dense', hidden, hidden)]);
    const labels = options.labels;
    g.node(
      'Add',
      [
        g.node('MatMul', [pooled, weight('classifier.weight', [hidden, labels.length])]),
        weight('classifier.bias', [labels.length]),
      ],
      {},
      'logits',
    );
    g.output('logits', FLOAT, ['batch', labels.length]);
    config.id2label = Object.fromEntries(labels.map((label, id) => [String(id), label]));
    config.label2id = Object.fromEntries(labels.map((label, id) => [label, id]));
  }

  const dir = resolve(outDir);
  mkdirSync(dir, { recursive: true });
  const model = join(dir, 'model.onnx');
  writeFileSync(model, g.toBytes(17, 'Tiny BERT with random weights, for tests and benchmarks only.'));
  const { tokenizer, tokenizerConfig } = unigram ?? bertBaseUncasedTokenizer(options.maxPositions);
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), `${JSON.stringify(tokenizerConfig, null, 2)}\n`);
  return { dir, model };
}

function main(): void {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      task: { type: 'string', default: defaultTinyBertOptions.task },
      layers: { type: 'string' },
      hidden: { type: 'string' },
      heads: { type: 'string' },
      intermediate: { type: 'string' },
      'max-positions': { type: 'string' },
      labels: { type: 'string' },
      seed: { type: 'string' },
      'init-std': { type: 'string' },
      'no-token-type-ids': { type: 'boolean', default: false },
      tokenizer: { type: 'string', default: 'wordpiece' },
    },
  });
  if (!values.out) throw new Error('--out DIR is required');
  if (values.task !== 'sequence-classification' && values.task !== 'feature-extraction') {
    throw new Error(`--task must be sequence-classification or feature-extraction, not ${values.task}`);
  }
  if (values.tokenizer !== 'wordpiece' && values.tokenizer !== 'unigram') {
    throw new Error(`--tokenizer must be wordpiece or unigram, not ${values.tokenizer}`);
  }
  const num = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  const options: Partial<TinyBertOptions> = {
    task: values.task,
    tokenTypeIds: !values['no-token-type-ids'],
    tokenizer: values.tokenizer,
  };
  const set = <K extends keyof TinyBertOptions>(key: K, value: TinyBertOptions[K] | undefined) => {
    if (value !== undefined) options[key] = value;
  };
  set('layers', num(values.layers));
  set('hidden', num(values.hidden));
  set('heads', num(values.heads));
  set('intermediate', num(values.intermediate));
  set('maxPositions', num(values['max-positions']));
  set('seed', num(values.seed));
  set('initStd', num(values['init-std']));
  set('labels', values.labels?.split(','));
  const { dir } = generateTinyBert(values.out, options);
  console.log(`wrote ${dir} (${JSON.stringify({ ...defaultTinyBertOptions, ...options })})`);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
