/**
 * Prompt-injection detectors: text that tries to replace or leak the instructions an application
 * gave the model. Phrases match the normalized text (case, spacing, leetspeak and inserted
 * punctuation undone); chat-template tokens match the original text.
 */
import { type Anchor, type Detector, type Finding, findAll, firstAnchor } from './detector.ts';
import { any, opt, phrase, phraseFinder, upTo } from './phrases.ts';

const LABEL = 'PROMPT_INJECTION';

const FILLER = any(
  'all | any | every | each | of | the | your | my | these | those | that | this',
  'what | is | was | were | you | ve | have | been | given | told',
);
const EARLIER = any(
  'previous | prior | above | earlier | preceding | former | original | initial',
  'foregoing | old | existing | system | developer | safety | current | default',
  'preset | programmed | hidden | base',
);
const INSTRUCTIONS = any(
  'instructions | instruction | rules | rule | prompts | prompt | directives',
  'directive | guidelines | guideline | guardrails | programming | constraints',
  'restrictions | commands | directions | orders',
);

const ignoreInstructions: Detector = {
  id: 'ignore_instructions',
  family: 'prompt_injection',
  description: 'Asks the model to ignore, forget or override its previous instructions.',
  ...phraseFinder(LABEL, [
    {
      weight: 0.9,
      phrases: [
        phrase([
          any(
            'ignore | disregard | forget | skip | bypass | override | overlook | neglect',
            'abandon | discard | drop | do not follow | dont follow | stop following',
            'pay no attention to | set aside | throw away | erase | delete | reset',
          ),
          upTo(4, FILLER),
          upTo(2, EARLIER),
          INSTRUCTIONS,
        ]),
      ],
    },
    {
      weight: 0.7,
      phrases: [
        phrase([
          any('ignore', 'disregard', 'forget'),
          any('everything | all of | anything | all'),
          opt(any('written | said | stated | you were told | that came')),
          any('above | before this | before that | prior to this | so far'),
        ]),
      ],
    },
  ]),
};

const systemPromptLeak: Detector = {
  id: 'system_prompt_leak',
  family: 'prompt_injection',
  description: 'Asks the model to reveal its system prompt or hidden instructions.',
  ...phraseFinder(LABEL, [
    {
      weight: 0.8,
      phrases: [
        phrase([
          any(
            'reveal | show | print | display | output | repeat | tell me | tell us | give me',
            'leak | dump | expose | share | disclose | write out | spell out | recite | list',
            'what is | what are | whats | what were | copy | paste | translate | summarize',
            'return | echo',
          ),
          upTo(
            4,
            any(
              'your | the | me | us | my | all | of | full | entire | exact | complete | whole',
              'verbatim | back | real | actual | text | in',
            ),
          ),
          any(
            'system | initial | original | hidden | secret | developer | pre | first',
            'internal | confidential | starting',
          ),
          any('prompt | prompts | message | instructions | directives | rules | configuration', 'guidelines'),
        ]),
      ],
    },
    {
      weight: 0.7,
      phrases: [
        phrase([
          any('repeat | print | output | show | reveal | write'),
          opt(any('me')),
          any('everything | all | the text | the words | all the text | the instructions', 'your instructions'),
          any('above | before this | before my message | you were given | you were told'),
        ]),
        phrase([
          any('what'),
          any('were', 'are'),
          any('you'),
          any('told', 'instructed', 'programmed'),
          any('to do | before | at the start | initially'),
        ]),
      ],
    },
  ]),
};

const instructionOverride: Detector = {
  id: 'instruction_override',
  family: 'prompt_injection',
  description: 'Announces new instructions, a new role or an override (weak on its own).',
  ...phraseFinder(LABEL, [
    {
      weight: 0.6,
      phrases: [
        phrase([
          opt(any('your | the | these are | here are')),
          any('new | updated | real | true | actual | revised'),
          any('instructions | instruction | directives | system prompt | rules | task', 'objective | mission | orders'),
          any('are | is | follow | as follows | below | override'),
        ]),
        phrase([
          any('system | admin | administrator | developer | root | sudo | emergency | security'),
          any('override | overwrite | command | access granted | mode activated'),
        ]),
        phrase([
          any('end of'),
          opt(any('the', 'system')),
          any('prompt | system prompt | instructions | context'),
          opt(any('new', 'begin', 'start')),
        ]),
      ],
    },
    {
      weight: 0.4,
      phrases: [
        phrase([
          any('from now on'),
          opt(any('on')),
          any('you', 'your'),
          any('will | must | are | shall | should | only | role | task'),
        ]),
      ],
    },
  ]),
};

/** Special tokens of chat templates: a user message carrying them tries to forge another role. */
const TEMPLATE_TOKENS =
  /<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|start_header_id|end_header_id|eot_id|begin_of_text)\|>|\[\/?INST\]|<<\/?SYS>>/gi;
/** A line that poses as a role header: `### System:`, `[system]`, `<system>`, `SYSTEM:`. */
const ROLE_HEADER =
  /(?<![^\n])[ \t]{0,8}(?:#{1,6}[ \t]{0,4})?[[<]?(?:system|developer)(?: (?:prompt|message|instructions?))?[\]>]?[ \t]{0,4}[:\]>]/gim;

/** The same, tried at one position: a header starts a line and lies within it. */
const ROLE_HEADER_AT = new RegExp(ROLE_HEADER.source, 'imy');

const chatTemplateTokens: Detector = {
  id: 'chat_template_tokens',
  family: 'prompt_injection',
  description: 'Chat-template control tokens (<|im_start|>, [INST], <<SYS>>) or a forged "System:" header line.',
  // The longest role header: 8 blanks, `######`, 4 blanks, `[developer instructions]`, 4 blanks,
  // `:` (47); the longest token, `<|start_header_id|>`, is 19.
  maxSpanChars: 47,
  detectChars: 47, // the whole token or header: the closing `|>`, `]`, `>` or `:` makes it one
  // Every token starts with < or [; a header is tried at each line start (prompts have few lines).
  find: (view) => [
    ...findAll(view.text, TEMPLATE_TOKENS, LABEL, 0.8, undefined, firstAnchor(view.text, TOKEN_ANCHORS)),
    ...roleHeaders(view.text),
  ],
  reference: (view) => [
    ...findAll(view.text, TEMPLATE_TOKENS, LABEL, 0.8),
    ...findAll(view.text, ROLE_HEADER, LABEL, 0.4),
  ],
  pendingFrom: (view) => templatePending(view.text),
};

/**
 * A token from its last `<` or `[` (a token is at most 19 characters); a role header from the
 * start of the last line while that line may still begin one (at most 47 characters, its word a
 * prefix of `system` or `developer` or the other way round).
 */
function templatePending(text: string): number {
  let pending = text.length;
  const open = Math.max(text.lastIndexOf('<'), text.lastIndexOf('['));
  if (open >= 0 && text.length - open <= 19) pending = open;
  const line = text.lastIndexOf('\n') + 1;
  if (text.length - line <= 47) {
    const word = text
      .slice(line)
      .replace(/^[ \t#[<]*/, '')
      .slice(0, 9)
      .toLowerCase();
    if ('system'.startsWith(word.slice(0, 6)) || 'developer'.startsWith(word)) pending = Math.min(pending, line);
  }
  return pending;
}

const TOKEN_ANCHORS: Anchor[] = [
  ['<', 0],
  ['[', 0],
];

function roleHeaders(text: string): Finding[] {
  const out: Finding[] = [];
  for (let line = 0; line < text.length; ) {
    ROLE_HEADER_AT.lastIndex = line;
    const m = ROLE_HEADER_AT.exec(text);
    if (m !== null) out.push({ start: line, end: line + m[0].length, label: LABEL, weight: 0.4 });
    const newline = text.indexOf('\n', line);
    if (newline === -1) break;
    line = newline + 1;
  }
  return out;
}

export const injectionDetectors: Detector[] = [
  ignoreInstructions,
  systemPromptLeak,
  instructionOverride,
  chatTemplateTokens,
];
