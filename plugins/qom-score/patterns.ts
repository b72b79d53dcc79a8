/**
 * Fixed word lists and patterns used by the QoM dimensions. They are constants so that scores
 * are deterministic and the same message always scores the same.
 */

/** Values that say nothing: test data, fillers, type names typed in as values. */
export const placeholderWords = new Set([
  'test',
  'testing',
  'tests',
  'foo',
  'bar',
  'baz',
  'qux',
  'foobar',
  'xxx',
  'asdf',
  'qwerty',
  'lorem',
  'lorem ipsum',
  'placeholder',
  'todo',
  'tbd',
  'fixme',
  'n/a',
  'na',
  'none',
  'null',
  'nil',
  'undefined',
  'example',
  'sample',
  'dummy',
  'string',
  'value',
  'text',
  'abc',
  '123',
  '1234',
  '12345',
  'changeme',
  'default',
  'something',
  'whatever',
  '...',
  '?',
  '-',
]);

/** `aaaa`, `xxxxx`, `test1`, `foo_2`: repeated characters or placeholder words with a number. */
export const placeholderPattern = /^(?:(.)\1{2,}|(?:test|foo|bar|baz|dummy|sample|example)[\s_-]?\d*)$/i;

export interface RiskPattern {
  kind: 'secret' | 'shell_injection' | 'path_traversal' | 'prompt_injection' | 'control_chars';
  /** Subtracted from the safety score for each string leaf it is found in. */
  penalty: number;
  pattern: RegExp;
}

/** Patterns without nested quantifiers (linear time). Strings are scanned up to `scanLimit` chars. */
export const riskPatterns: RiskPattern[] = [
  { kind: 'secret', penalty: 0.5, pattern: /\bAKIA[0-9A-Z]{16}\b/ },
  { kind: 'secret', penalty: 0.5, pattern: /-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----/ },
  { kind: 'secret', penalty: 0.5, pattern: /\bgh[pousr]_[A-Za-z0-9]{36,}/ },
  { kind: 'secret', penalty: 0.5, pattern: /\bxox[abprs]-[A-Za-z0-9-]{10,}/ },
  { kind: 'secret', penalty: 0.5, pattern: /\bsk-[A-Za-z0-9_-]{20,}/ },
  { kind: 'secret', penalty: 0.5, pattern: /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/ },
  {
    kind: 'secret',
    penalty: 0.5,
    pattern: /\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)\s{0,3}[:=]\s{0,3}\S{4,}/i,
  },
  {
    kind: 'shell_injection',
    penalty: 0.25,
    pattern:
      /`[^`\n]{1,200}`|\$\([^)\n]{1,200}\)|(?:;|&&|\|\|?)\s{0,3}(?:rm|curl|wget|sh|bash|zsh|nc|ncat|chmod|chown|python[23]?|perl|ruby|php|cat|sudo|kill|mkfifo|eval|exec)\b/,
  },
  { kind: 'path_traversal', penalty: 0.25, pattern: /(?:\.\.[/\\]){2,}|\/etc\/(?:passwd|shadow)\b/ },
  {
    kind: 'prompt_injection',
    penalty: 0.25,
    pattern:
      /\b(?:ignore|disregard|forget)\s+(?:all\s+)?(?:the\s+)?(?:previous|prior|above|earlier)\s+(?:instructions|prompts?|rules)\b/i,
  },
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this looks for
  { kind: 'control_chars', penalty: 0.25, pattern: /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u001b]/ },
];

/** A string longer than this is itself a risk (payload stuffing); also the scan limit. */
export const longStringChars = 8192;
export const longStringPenalty = 0.25;
export const scanLimit = 16384;
