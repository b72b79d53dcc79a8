/**
 * Hidden-text detectors (family `hidden_text`), markup part: text written for the model rather
 * than for the person reading it. A poisoned tool description wraps its orders in tags a model
 * treats as authoritative (`<IMPORTANT>…</IMPORTANT>`, the Invariant Labs tool-poisoning proof of
 * concept; `<system>`, `<system-reminder>`), in a chat template's control tokens, or in an HTML
 * comment that a Markdown view of the description does not show.
 *
 * `instruction_markup` finds the tags and tokens (original text, any case); `hidden_comment` finds
 * `<!-- … -->` comments whose content addresses a model or gives orders about the user. Ordinary
 * markup (`<b>`, `<code>`, `<user>` in an XML example) and comments (`<!-- header -->`) are left
 * alone.
 */
import { type Anchor, type Detector, type Finding, firstAnchor, pushFinding } from './detector.ts';

const LABEL = 'INSTRUCTION_MARKUP';

/** Tag names that demand attention or claim a role; the first group weighs more. */
const ATTENTION =
  'important|critical|urgent|mandatory|instructions?|hidden|secret|override' +
  '|system[-_ ](?:prompt|message|instructions?|reminder|note|override)' +
  '|admin(?:istrator)?[-_ ](?:note|instructions?|message)' +
  '|ai[-_ ](?:instructions?|note|only)|note[-_ ]to[-_ ](?:the[-_ ])?(?:ai|assistant|model|llm)' +
  '|(?:for|to)[-_ ]the[-_ ](?:ai|assistant|model|llm)';
const ROLE = 'system|assistant|developer|admin(?:istrator)?';
/**
 * `<name>`, `</name>`, `<name attr="…">`, `<name/>` for those names: up to 4 blanks inside the
 * brackets; attributes on the line, with an `=` (so `a<system and b>c` in code is no tag): up to 32
 * characters, `=`, up to 64.
 */
const TAG = `</?[ \\t]{0,4}(?:(${ATTENTION})|(?:${ROLE}))(?:[ \\t][^<>\\n=]{0,32}=[^<>\\n]{0,64})?[ \\t]{0,4}/?>`;
/** Any chat-template special token (`<|im_start|>`, `<|channel|>`…), and Mistral's bracketed ones. */
const TOKEN =
  '<\\|[A-Za-z_][A-Za-z0-9_.-]{0,31}\\|>|\\[/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\\]';
const MARKUP = new RegExp(`${TAG}|(${TOKEN})`, 'gi');
const MARKUP_ANCHORS: Anchor[] = [
  ['<', 0],
  ['[', 0],
];

/**
 * The longest match: `</`, 4 blanks, the longest name (`administrator_instructions`, 26), a blank,
 * 32 characters, `=`, 64 characters, 4 blanks, `/>` (136); a token is at most 36.
 */
const MARKUP_MAX = 2 + 4 + 26 + 1 + 32 + 1 + 64 + 4 + 2;

function weigh(m: RegExpExecArray): number {
  return m[1] !== undefined || m[2] !== undefined ? 0.8 : 0.6;
}

function markup(text: string, from: number): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  MARKUP.lastIndex = from;
  for (let m = MARKUP.exec(text); m !== null; m = MARKUP.exec(text)) {
    out.push({ start: m.index, end: m.index + m[0].length, label: LABEL, weight: weigh(m) });
  }
  return out;
}

const instructionMarkup: Detector = {
  id: 'instruction_markup',
  family: 'hidden_text',
  description: 'Tags addressed to the model (<IMPORTANT>, <system>, <instructions>…) and chat-template special tokens.',
  maxSpanChars: MARKUP_MAX,
  detectChars: MARKUP_MAX, // the closing `>` (or `|>`, `]`) makes it a tag
  find: (view) => markup(view.text, firstAnchor(view.text, MARKUP_ANCHORS)),
  reference: (view) => markup(view.text, 0),
};

// ---------------------------------------------------------------- comments

/**
 * In a comment: a model named, or orders about what the user must not learn. `\b` on both sides:
 * `ai` is not `said`, `gpt` not `gpts`.
 */
const ADDRESSED =
  /\b(?:ai|llms?|assistant|chatbot|claude|chatgpt|gpt(?:-?\d[a-z0-9.-]*)?|copilot|gemini|instructions?|system[ \t]+prompt|ignore|disregard|(?:do[ \t]+not|don'?t|never)[ \t]+(?:tell|mention|inform|reveal|show|let)|without[ \t]+(?:telling|informing|mentioning))\b/i;

/** 1024 characters: a longer comment is reported in pieces. */
const COMMENT_MAX = 1024;

function comments(text: string, first: number): Finding[] {
  const out: Finding[] = [];
  for (let open = first; open !== -1; ) {
    const close = text.indexOf('-->', open + 4);
    // Unclosed, a comment hides the rest of the text.
    const contentEnd = close === -1 ? text.length : close;
    const end = close === -1 ? text.length : close + 3;
    if (ADDRESSED.test(text.slice(open + 4, contentEnd))) pushFinding(out, open, end, LABEL, 0.7, COMMENT_MAX);
    if (close === -1) break;
    open = text.indexOf('<!--', end);
  }
  return out;
}

const hiddenComment: Detector = {
  id: 'hidden_comment',
  family: 'hidden_text',
  description:
    'An HTML comment (hidden where Markdown is rendered) that addresses a model or hides orders from the user.',
  maxSpanChars: COMMENT_MAX,
  // Whether it addresses a model can depend on its last words: the whole comment.
  detectChars: COMMENT_MAX,
  find: (view) => comments(view.text, view.text.indexOf('<!--')),
  // One regex over the whole text: a comment and its content, to `-->` or the end.
  reference(view) {
    const out: Finding[] = [];
    const re = /<!--([\s\S]*?)(?:-->|$)/g;
    for (let m = re.exec(view.text); m !== null; m = re.exec(view.text)) {
      if (ADDRESSED.test(m[1])) pushFinding(out, m.index, m.index + m[0].length, LABEL, 0.7, COMMENT_MAX);
      if (m.index + m[0].length === view.text.length) break;
    }
    return out;
  },
};

export const instructionMarkupDetectors: Detector[] = [instructionMarkup, hiddenComment];
