/**
 * Seeded generators of ordinary text without meaning: random word sequences ("word salads"),
 * lorem ipsum, faker's stock sentences, and such text around personal data, code and JSON, placed
 * where a request's text holds it (a message, a tool description, tool-call arguments). Negatives
 * for the injection model: property tests (and real clients: test traffic, keyword lists, logs)
 * send exactly this, and a model that has never seen it reads an unusual short text as an attack
 * (the default tenant's model refused "weather coast jane.doe@example.org today with").
 *
 * Everything comes from @faker-js/faker (MIT) seeded from the caller's SeededRandom, so a run
 * gives the same texts (for the faker version in package-lock.json); no public data set is read.
 */
import { base, en, Faker } from '@faker-js/faker';
import type { Generated } from './injection-generators.ts';
import type { SeededRandom } from './seeded-random.ts';

type Make = (f: Faker) => string;

/** Random English words, `min`..`max` of them, of every part of speech faker lists. */
function salad(f: Faker, min: number, max: number): string {
  const n = f.number.int({ min, max });
  const words: string[] = [];
  for (let i = 0; i < n; i++) {
    words.push(
      f.helpers.weightedArrayElement([
        { weight: 5, value: () => f.word.sample() },
        { weight: 2, value: () => f.word.noun() },
        { weight: 1, value: () => f.word.verb() },
        { weight: 1, value: () => f.word.adjective() },
        { weight: 1, value: () => f.word.adverb() },
        { weight: 2, value: () => f.word.preposition() },
        { weight: 2, value: () => f.word.conjunction() },
        { weight: 1, value: () => f.location.city() },
        { weight: 1, value: () => f.lorem.word() },
      ])(),
    );
  }
  const text = words.join(' ');
  // Some are written as sentences, some all lower case, some capitalised at random.
  return f.helpers.arrayElement([
    () => text,
    () => `${text[0]?.toUpperCase() ?? ''}${text.slice(1)}.`,
    () => words.map((w) => (f.datatype.boolean(0.3) ? w[0].toUpperCase() + w.slice(1) : w)).join(' '),
    () => words.join(f.helpers.arrayElement([', ', ' - ', '\n', ' '])),
  ])();
}

/** The words of the classic "Lorem ipsum" filler (the Latin most tools and test generators draw from). */
const LOREM_CLASSIC = (
  'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore ' +
  'magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea commodo ' +
  'consequat duis aute irure in reprehenderit voluptate velit esse cillum eu fugiat nulla pariatur excepteur sint ' +
  'occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est laborum curabitur pretium ' +
  'tincidunt lacus nulla gravida orci a odio nullam varius turpis et commodo pharetra eros bibendum nec luctus ' +
  'felis sollicitudin mauris integer dui quam posuere ultrices pellentesque vitae justo fusce augue sodales ' +
  'blandit massa aliquam erat volutpat cras tempus ligula semper ornare purus convallis euismod mi egestas ' +
  'vestibulum diam primis cubilia curae maecenas porttitor suspendisse faucibus dignissim praesent vehicula ' +
  'congue tortor nisl placerat lectus metus aenean nibh libero ante fermentum sem proin mollis pede ullamcorper'
).split(' ');

/** Sentences of classic lorem ipsum: capitalised, with commas here and there. */
function loremClassic(f: Faker): string {
  return f.helpers
    .multiple(
      () => {
        const words = f.helpers.multiple(() => f.helpers.arrayElement(LOREM_CLASSIC), { count: { min: 2, max: 16 } });
        const text = words.map((w) => (f.datatype.boolean(0.15) ? `${w},` : w)).join(' ');
        return `${text[0].toUpperCase()}${text.slice(1).replace(/,$/, '')}.`;
      },
      { count: { min: 1, max: 6 } },
    )
    .join(f.helpers.arrayElement([' ', '  ', '\n']));
}

/** Values a salad may carry (placed in ordinary text by people and tests alike). */
const VALUES: Make[] = [
  (f) => f.internet.email(),
  (f) => f.internet.exampleEmail(),
  (f) => f.phone.number(),
  (f) => f.finance.creditCardNumber(),
  (f) => f.finance.iban({ formatted: f.datatype.boolean() }),
  (f) => f.internet.url(),
  (f) => f.internet.ipv4(),
  (f) => f.internet.ipv6(),
  (f) => f.person.fullName(),
  (f) => f.location.streetAddress({ useFullAddress: true }),
  (f) => f.string.uuid(),
  (f) => f.date.recent().toISOString(),
  (f) => f.finance.amount({ symbol: f.finance.currencySymbol() }),
  (f) => f.internet.username(),
  (f) => f.system.filePath(),
  (f) => f.color.rgb(),
  (f) => f.git.commitSha({ length: 7 }),
];

/** Code lines made of random identifiers. */
const CODE: Make[] = [
  (f) =>
    `const ${f.word.noun()}${f.word.noun().replace(/^./, (c) => c.toUpperCase())} = ${f.word.verb()}(${f.word.noun()}, ${f.number.int(99)});`,
  (f) =>
    `def ${f.word.verb()}_${f.word.noun()}(${f.word.noun()}):\n    return ${f.word.noun()}.get("${f.word.noun()}", ${f.number.int(9)})`,
  (f) => `${f.database.column()} = ${f.database.type()}(${f.number.int(255)}) NOT NULL`,
  (f) => `SELECT ${f.database.column()} FROM ${f.word.noun()} WHERE ${f.database.column()} = '${f.word.sample()}';`,
  (f) => `<${f.helpers.arrayElement(['div', 'span', 'p', 'li'])} class="${f.word.noun()}">${f.word.words(3)}</div>`,
  (f) => `${f.system.commonFileName()}:${f.number.int(400)}: ${f.hacker.phrase()}`,
  (f) => `if (${f.word.noun()} && ${f.word.noun()}.${f.word.verb()}) { ${f.word.noun()}++; }`,
  (f) => `$ ${f.helpers.arrayElement(['ls', 'cat', 'grep', 'curl', 'npm run', 'git'])} ${f.system.filePath()}`,
];

/** A JSON value of random words (an object, an array, strings and numbers). */
function jsonOf(f: Faker, depth = 0): unknown {
  const kind = depth >= 2 ? f.number.int(2) : f.number.int(4);
  if (kind === 0) return salad(f, 1, 6);
  if (kind === 1) return f.number.float({ max: 1000, fractionDigits: f.number.int(2) });
  if (kind === 2) return f.helpers.multiple(() => jsonOf(f, depth + 1), { count: { min: 1, max: 3 } });
  const entries = f.helpers.multiple(() => [f.database.column(), jsonOf(f, depth + 1)], { count: { min: 1, max: 4 } });
  return Object.fromEntries(entries);
}

/** Text with a value in it, somewhere among the words. */
const around = (f: Faker, value: string) => `${salad(f, 0, 6)} ${value} ${salad(f, 0, 6)}`.trim();

const TOOL = (f: Faker) => `${f.word.verb()}_${f.word.noun()}`;

const COMMANDS = [
  'say',
  'Say',
  'tell me',
  'write',
  'send',
  'find',
  'make',
  'give me',
  'list',
  'translate',
  'summarize',
  'describe',
  'check',
  'show me',
  'echo',
  'print',
  'spell',
  'explain',
];

/** Placeholders as templates and redacted text write them. */
const PLACEHOLDERS: Make[] = [
  (f) => `{{${f.database.column()}}}`,
  (f) => `{${f.database.column()}}`,
  (f) => `\${${f.database.column().toUpperCase()}}`,
  (f) => `[${f.helpers.arrayElement(['EMAIL', 'PHONE', 'NAME', 'REDACTED', 'CREDIT_CARD', 'IBAN', 'ADDRESS'])}]`,
  (f) => `<${f.database.column()}>`,
  (f) => `%${f.helpers.arrayElement(['s', 'd', '(name)s'])}`,
  (f) => `:${f.database.column()}`,
];

/**
 * Kinds of text; each text is its own group (background negatives, like gen-chat: every split
 * sees every kind — they teach what ordinary text looks like).
 */
const KINDS: Record<string, Make> = {
  salad: (f) => salad(f, 1, 40),
  'salad-short': (f) => salad(f, 1, 5),
  lorem: (f) =>
    f.helpers.arrayElement([
      () => f.lorem.words(f.number.int({ min: 1, max: 30 })),
      () => f.lorem.sentence(),
      () => f.lorem.sentences(f.number.int({ min: 1, max: 4 })),
      () => f.lorem.paragraph(),
      () => f.lorem.lines(f.number.int({ min: 1, max: 4 })),
      () => f.lorem.slug(f.number.int({ min: 1, max: 6 })),
    ])(),
  'lorem-classic': (f) =>
    f.helpers.arrayElement([
      () => loremClassic(f),
      () => loremClassic(f),
      () => `${salad(f, 0, 6)} ${f.helpers.arrayElement(VALUES)(f)} ${loremClassic(f)}`.trim(),
      () => `${loremClassic(f)} ${f.helpers.arrayElement(VALUES)(f)} ${loremClassic(f)}`,
    ])(),
  sentences: (f) =>
    f.helpers
      .multiple(
        () =>
          f.helpers.arrayElement([
            () => f.hacker.phrase(),
            () => f.company.catchPhrase(),
            () => f.company.buzzPhrase(),
            () => f.commerce.productDescription(),
            () => f.word.words(f.number.int({ min: 2, max: 12 })),
          ])(),
        { count: { min: 1, max: 3 } },
      )
      .join(' '),
  'salad-pii': (f) => around(f, f.helpers.arrayElement(VALUES)(f)),
  // A value or a placeholder alone or nearly: a short text of one odd token.
  value: (f) => {
    const value = f.helpers.arrayElement([...VALUES, ...PLACEHOLDERS, ...PLACEHOLDERS])(f);
    return f.helpers.arrayElement([
      () => value,
      () => value,
      () => `${salad(f, 1, 2)} ${value}`,
      () => `${value} ${salad(f, 1, 2)}`,
      () => `${f.word.verb()} ${value}`,
      () => `${f.helpers.arrayElement(['def', 'function', 'fn', 'let', 'print'])} ${f.word.noun()}(\n${value}`,
    ])();
  },
  // An everyday verb and words: "say …", "write …", "send …" with no attack in them.
  command: (f) =>
    `${f.helpers.arrayElement(COMMANDS)} ${f.helpers.arrayElement([() => salad(f, 1, 8), () => around(f, f.helpers.arrayElement([...VALUES, ...PLACEHOLDERS])(f))])()}`,
  // A label and a number, as test traffic and tickets write them ("scenario 12", "order 4711").
  'label-number': (f) =>
    `${f.helpers.arrayElement([() => f.word.noun(), () => f.lorem.word(), () => f.database.column()])()} ${f.number.int(f.helpers.arrayElement([9, 99, 999, 99999]))}`,
  'salad-pii-several': (f) =>
    f.helpers.multiple(() => around(f, f.helpers.arrayElement(VALUES)(f)), { count: { min: 2, max: 4 } }).join(' '),
  'salad-code': (f) => `${salad(f, 0, 8)}\n${f.helpers.arrayElement(CODE)(f)}\n${salad(f, 0, 8)}`.trim(),
  'salad-json': (f) => JSON.stringify(jsonOf(f), null, f.datatype.boolean() ? 2 : undefined),
  // As the request text reads a chat request with a tool: message, tool name, description, schema.
  'salad-tool': (f) => {
    const param = f.database.column();
    const description = around(f, f.helpers.arrayElement(VALUES)(f));
    return f.helpers.arrayElement([
      () =>
        `${salad(f, 1, 8)}\n${TOOL(f)}\n${description}\n${JSON.stringify({ type: 'object', properties: { [param]: { type: 'string' } } })}`,
      () =>
        `${salad(f, 1, 8)}\n${TOOL(f)}\n${JSON.stringify({ type: 'object', properties: { [param]: { type: 'string', description } } })}`,
      () => `${salad(f, 1, 8)}\n${TOOL(f)}\n${JSON.stringify({ [param]: description })}\n${salad(f, 1, 3)}`,
      () => `${salad(f, 1, 8)}\n${description}`,
      () => `${f.word.verb()} ${description}`,
    ])();
  },
};

export const WORD_SALAD_KINDS = Object.keys(KINDS);

/** `count` texts, the kinds in turn. */
export function generateWordSalad(random: SeededRandom, count: number): Generated[] {
  const f = new Faker({ locale: [en, base] });
  f.seed(random.int(2 ** 31));
  // Dates relative to a fixed day, not to today: the same texts on every run.
  f.setDefaultRefDate(new Date('2025-06-01T00:00:00Z'));
  const out: Generated[] = [];
  for (let i = 0; i < count; i++) {
    const kind = WORD_SALAD_KINDS[i % WORD_SALAD_KINDS.length];
    out.push({ text: KINDS[kind](f), group: `salad:${kind}:${i}` });
  }
  return out;
}
