/**
 * A seeded generator of labelled PII sentences and hard negatives for the pattern tier's PII
 * detectors (the `pii` family). Everything is synthetic: @faker-js/faker's per-locale phone
 * formats, e-mail addresses and card numbers, IBANs, and national identifiers built here with
 * their check digits; no public data set is read (presidio-research data is kept for the
 * independent evaluation of issue 25 and must not be used to tune the detectors).
 *
 *   npx tsx bench/detect/pii-generate.ts [--seed 25] [--out .data/detect/pii-eval.jsonl] [--sample bench/detect/pii-sample.jsonl]
 *
 * Each item: `{id, text, kind, group, spans: [{start, end, type}]}`. `kind` is `positive`
 * (sentences holding one or two values, each span labelled with the detector label it should get:
 * PHONE, EMAIL, CREDIT_CARD, IBAN, NATIONAL_ID) or `hard_negative` (numbers that look like PII
 * and are not: order numbers, dates, times, versions, prices, ISBNs, 16-digit numbers failing
 * Luhn, postal codes, coordinates, IP addresses, measurements). `group` is the locale (phones)
 * or the kind of value.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allFakers, type Faker } from '@faker-js/faker';

export interface Span {
  start: number;
  end: number;
  type: string;
}
export interface Item {
  id: string;
  text: string;
  kind: 'positive' | 'hard_negative';
  group: string;
  spans: Span[];
}

/** Locales whose phone formats are generated (faker locale → region), those of the default regions. */
export const PHONE_LOCALES: Record<string, string> = {
  en_US: 'US',
  en_CA: 'CA',
  en_GB: 'GB',
  en_IE: 'IE',
  de: 'DE',
  de_AT: 'AT',
  de_CH: 'CH',
  fr: 'FR',
  fr_BE: 'BE',
  nl: 'NL',
  es: 'ES',
  pt_PT: 'PT',
  it: 'IT',
  pl: 'PL',
  sv: 'SE',
  pt_BR: 'BR',
  es_MX: 'MX',
  en_IN: 'IN',
  en_AU: 'AU',
  ja: 'JP',
};

/** Sentences around a phone number: with a word that says so, and without. */
const PHONE_TEMPLATES = [
  'Call me at {v} tomorrow.',
  'My phone number is {v}.',
  'You can reach {name} on {v} after 5pm.',
  'Tel: {v}',
  'Contact: {name}, {v}, {city}',
  'Please text {v} when you arrive.',
  'Her mobile is {v} and she prefers WhatsApp.',
  '{name} ({v}) will pick you up.',
  'For bookings ring {v} or write to us.',
  'Phone {v} / fax {v2}',
  '{name} - {v}',
  'If there is a problem, {name} can be reached at {v}.',
  'Emergency contact: {v}',
  'Numbers: {v}, {v2}',
  'Ligue para {v} amanhã.',
  'Llámame al {v}, por favor.',
  'Rufen Sie mich unter {v} an.',
  'Appelez-moi au {v}.',
  'Zadzwoń pod numer {v}.',
  'Chiamami al {v}.',
];

const EMAIL_TEMPLATES = [
  'Send the report to {v} by Friday.',
  'My email is {v}.',
  'Contact {name} <{v}> for details.',
  'cc: {v}',
];
const CARD_TEMPLATES = [
  'My card number is {v}, expiry 04/27.',
  'Charge it to {v} please.',
  'Card: {v}',
  'I paid with the card ending in {v}? No, the full number is {v}.',
];
const IBAN_TEMPLATES = ['Please transfer the deposit to {v}.', 'IBAN: {v}', 'Account {name}, {v}'];
const ID_TEMPLATES = [
  'My social security number is {v}.',
  'SSN {v}',
  'National Insurance number: {v}',
  'DNI {v}',
  'Her ID is {v}.',
];

/** Fills `{v}` (and `{v2}`) with values, the other placeholders with words; the spans of the values. */
function fill(template: string, values: Array<[string, string]>, f: Faker): { text: string; spans: Span[] } {
  let text = '';
  const spans: Span[] = [];
  const parts = template.split(/(\{v2?\}|\{name\}|\{city\})/);
  for (const part of parts) {
    if (part === '{v}' || part === '{v2}') {
      const [value, type] = part === '{v}' ? values[0] : (values[1] ?? values[0]);
      spans.push({ start: text.length, end: text.length + value.length, type });
      text += value;
    } else if (part === '{name}') text += f.person.fullName();
    else if (part === '{city}') text += f.location.city();
    else text += part;
  }
  return { text, spans };
}

// ---------------------------------------------------------------- values built here

const digitsOf = (f: Faker, n: number) => f.string.numeric({ length: n, allowLeadingZeros: true });

function luhnCheck(body: string): number {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return (10 - (sum % 10)) % 10;
}

function ssn(f: Faker): string {
  let area: number;
  do area = f.number.int({ min: 1, max: 899 });
  while (area === 666);
  const group = f.number.int({ min: 1, max: 99 });
  const serial = f.number.int({ min: 1, max: 9999 });
  const sep = f.helpers.arrayElement(['-', ' ']);
  return [String(area).padStart(3, '0'), String(group).padStart(2, '0'), String(serial).padStart(4, '0')].join(sep);
}

function nino(f: Faker): string {
  const first = f.helpers.arrayElement([...'ABCEGHJKLMNOPRSTWXYZ']);
  const second = f.helpers.arrayElement([...'ABCEGHJKLMNPRSTWXYZ']);
  const prefix = `${first}${second}`;
  if (['BG', 'GB', 'KN', 'NK', 'NT', 'TN', 'ZZ'].includes(prefix)) return nino(f);
  const d = digitsOf(f, 6);
  const suffix = f.helpers.arrayElement([...'ABCD']);
  return f.datatype.boolean()
    ? `${prefix} ${d.slice(0, 2)} ${d.slice(2, 4)} ${d.slice(4)} ${suffix}`
    : `${prefix}${d}${suffix}`;
}

function dni(f: Faker): string {
  const letters = 'TRWAGMYFPDXBNJZSQVHLCKE';
  if (f.datatype.boolean()) {
    const n = digitsOf(f, 8);
    return `${n}${letters[Number(n) % 23]}`;
  }
  const x = f.number.int({ min: 0, max: 2 });
  const n = digitsOf(f, 7);
  return `${'XYZ'[x]}${n}${letters[Number(`${x}${n}`) % 23]}`;
}

function spacedCard(f: Faker): string {
  const raw = f.finance.creditCardNumber().replace(/\D/g, '');
  const style = f.number.int({ min: 0, max: 2 });
  if (style === 0) return raw;
  const sep = style === 1 ? ' ' : '-';
  if (raw.length === 15) return [raw.slice(0, 4), raw.slice(4, 10), raw.slice(10)].join(sep);
  return (raw.match(/.{1,4}/g) as string[]).join(sep);
}

// ---------------------------------------------------------------- hard negatives

/** A 16-digit number whose Luhn check fails, written as cards are. */
function badLuhn(f: Faker): string {
  const body = f.helpers.arrayElement(['4', '5', '3', '6']) + digitsOf(f, 14);
  const digits = body + ((luhnCheck(body) + f.number.int({ min: 1, max: 9 })) % 10);
  const style = f.number.int({ min: 0, max: 2 });
  return style === 0 ? digits : (digits.match(/.{4}/g) as string[]).join(style === 1 ? ' ' : '-');
}

function isbn13(f: Faker): string {
  const body = `978${digitsOf(f, 9)}`;
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Number(body[i]) * (i % 2 ? 3 : 1);
  const check = (10 - (sum % 10)) % 10;
  const a = f.number.int({ min: 1, max: 2 });
  const b = f.number.int({ min: 2, max: 5 });
  const rest = body.slice(3);
  return `978-${rest.slice(0, a)}-${rest.slice(a, a + b)}-${rest.slice(a + b)}-${check}`;
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

const NEGATIVES: Record<string, Array<(f: Faker) => string>> = {
  order_number: [
    (f) => `Your order #${digitsOf(f, 8)} has shipped.`,
    (f) => `Order number: ${f.number.int({ min: 1e9, max: 9.9e9 })}`,
    (f) => `Reference ORD-${f.number.int({ min: 2015, max: 2026 })}-${digitsOf(f, 6)}`,
    (f) => `Invoice ${f.number.int({ min: 1e6, max: 9e9 })} is due on the 5th.`,
    (f) => `Tracking number 1Z${f.string.alphanumeric({ length: 6, casing: 'upper' })}${digitsOf(f, 10)}`,
    (f) => `Ticket ${digitsOf(f, 7)} was closed.`,
    (f) => `Customer ID ${digitsOf(f, 9)}`,
  ],
  date: [
    (f) => `The meeting is on ${f.date.past().toISOString().slice(0, 10)}.`,
    (f) => {
      const d = f.date.past();
      return `Born ${pad(d.getDate())}/${pad(d.getMonth() + 1)}/${d.getFullYear()}`;
    },
    (f) => {
      const d = f.date.past();
      return `Valid until ${pad(d.getDate())}.${pad(d.getMonth() + 1)}.${d.getFullYear()} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
    },
    (f) => {
      const d = f.date.past();
      return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} INFO started`;
    },
    (f) =>
      `From ${f.number.int({ min: 1950, max: 2000 })} to ${f.number.int({ min: 2001, max: 2026 })} he lived abroad.`,
  ],
  time: [
    (f) =>
      `The train leaves at ${pad(f.number.int({ max: 23 }))}:${pad(f.number.int({ max: 59 }))} and arrives at ${pad(f.number.int({ max: 23 }))}:${pad(f.number.int({ max: 59 }))}.`,
    (f) =>
      `Elapsed: ${pad(f.number.int({ max: 99 }))}:${pad(f.number.int({ max: 59 }))}:${pad(f.number.int({ max: 59 }))}.${digitsOf(f, 3)}`,
  ],
  version: [
    (f) => `Upgrade to v${f.system.semver()} first.`,
    (f) => `Windows version 10.0.${f.number.int({ min: 10000, max: 22999 })}.${f.number.int({ min: 1, max: 9999 })}`,
    (f) =>
      `Build ${f.number.int({ min: 1, max: 30 })}.${f.number.int({ max: 99 })}.${f.number.int({ min: 1000, max: 9999 })}.${f.number.int({ max: 999 })}`,
  ],
  price: [
    (f) =>
      `It costs $${f.number.int({ min: 1000, max: 9999999 }).toLocaleString('en-US')}.${pad(f.number.int({ max: 99 }))}`,
    (f) => `Der Preis beträgt ${f.number.int({ min: 1000000, max: 99999999 }).toLocaleString('de-DE')} €.`,
    (f) => `Budget: EUR ${f.number.int({ min: 1000000, max: 99999999 })}`,
    (f) => `Prix : ${f.number.int({ min: 1000000, max: 99999999 }).toLocaleString('fr-FR')} €`,
    (f) => `Revenue grew to ${f.number.int({ min: 1000000, max: 99999999 }).toLocaleString('en-US')} USD`,
  ],
  isbn: [
    (f) => `ISBN ${isbn13(f)}`,
    (f) => `See ${isbn13(f)} for the second edition.`,
    (f) => `ISBN: ${isbn13(f).replace(/-/g, '')}`,
  ],
  bad_luhn_16: [(f) => `Card ${badLuhn(f)}`, (f) => `${badLuhn(f)}`, (f) => `The number ${badLuhn(f)} was rejected.`],
  postal_code: [
    (f) => `Ship to ${f.location.streetAddress()}, ${f.location.city()} ${f.location.zipCode('#####-####')}`,
    () =>
      `${allFakers.de.location.zipCode()} ${allFakers.de.location.city()}, ${allFakers.de.location.zipCode()} ${allFakers.de.location.city()}`,
    (f) => `Postcode ${allFakers.en_GB.location.zipCode()}, ${f.location.zipCode('#####')}`,
    () => `${allFakers.pl.location.zipCode()} Warszawa`,
  ],
  coordinates: [
    (f) => `Meet at ${f.location.latitude({ precision: 6 })}, ${f.location.longitude({ precision: 6 })}.`,
    (f) => `lat ${f.location.latitude({ precision: 7 })} lon ${f.location.longitude({ precision: 7 })}`,
  ],
  codes_and_ids: [
    (f) => `S/N ${digitsOf(f, 4)}-${digitsOf(f, 4)}-${digitsOf(f, 4)}`,
    (f) => `Part no. ${digitsOf(f, 3)}-${digitsOf(f, 4)}-${digitsOf(f, 2)}`,
    (f) =>
      `Sort code ${pad(f.number.int({ min: 10, max: 99 }))}-${pad(f.number.int({ max: 99 }))}-${pad(f.number.int({ max: 99 }))}, account ${digitsOf(f, 8)}`,
    (f) =>
      `Room ${f.number.int({ min: 100, max: 2999 })}, floor ${f.number.int({ min: 1, max: 40 })}, building ${f.number.int({ min: 1, max: 9 })}`,
    (f) =>
      `Flight LH ${f.number.int({ min: 100, max: 9999 })}, seat ${f.number.int({ min: 1, max: 60 })}C, gate ${f.number.int({ min: 1, max: 99 })}`,
    (f) =>
      `Scores: ${f.number.int({ max: 9 })}-${f.number.int({ max: 9 })}, ${f.number.int({ max: 9 })}-${f.number.int({ max: 9 })}, ${f.number.int({ max: 9 })}-${f.number.int({ max: 9 })}`,
    (f) => `Lottery numbers ${Array.from({ length: 6 }, () => f.number.int({ min: 1, max: 49 })).join(' ')}`,
    (f) => `Table row: ${digitsOf(f, 3)} ${digitsOf(f, 3)} ${digitsOf(f, 3)} ${digitsOf(f, 3)}`,
    (f) => `Commit ${f.git.commitSha({ length: 7 })} fixed issue #${f.number.int({ min: 1000, max: 99999 })}`,
  ],
  other_numbers: [
    (f) => `Server ${f.internet.ipv4()} is down.`,
    (f) => `Population: ${f.number.int({ min: 1000000, max: 99999999 }).toLocaleString('en-US')}`,
    (f) => `The file is ${f.number.int({ min: 1000000, max: 999999999 })} bytes.`,
    (f) => `Timestamp ${f.number.int({ min: 1500000000, max: 1800000000 })}`,
    () => 'pi is 3.14159265 and e is 2.71828182',
    (f) =>
      `Distance: ${f.number.float({ min: 1000, max: 99999, fractionDigits: 3 })} km, ${f.number.int({ min: 1000000, max: 9999999 })} steps`,
  ],
};

// ---------------------------------------------------------------- the set

export interface GenerateOptions {
  seed?: number;
  /** Phone sentences per locale. */
  phonesPerLocale?: number;
  /** Sentences per other PII type. */
  perType?: number;
  /** Hard negatives per kind. */
  negativesPerKind?: number;
}

export function generatePiiSet(options: GenerateOptions = {}): Item[] {
  const seed = options.seed ?? 25;
  const phonesPerLocale = options.phonesPerLocale ?? 150;
  const perType = options.perType ?? 300;
  const negativesPerKind = options.negativesPerKind ?? 300;
  const items: Item[] = [];
  const base = allFakers.en;
  base.seed(seed);
  // Every faker used is seeded, in a fixed order, so that the set is the same on every run.
  for (const [i, f] of Object.values(allFakers).entries()) f.seed(seed * 1000 + i);

  for (const locale of Object.keys(PHONE_LOCALES)) {
    const f = allFakers[locale as keyof typeof allFakers];
    for (let i = 0; i < phonesPerLocale; i++) {
      const style = f.helpers.arrayElement(['human', 'national', 'international'] as const);
      const v = f.phone.number({ style });
      const v2 = f.phone.number({ style: 'national' });
      const { text, spans } = fill(
        f.helpers.arrayElement(PHONE_TEMPLATES),
        [
          [v, 'PHONE'],
          [v2, 'PHONE'],
        ],
        f,
      );
      items.push({ id: `phone-${locale}-${i}`, text, kind: 'positive', group: `phone:${locale}:${style}`, spans });
    }
  }
  const f = base;
  const types: Array<[string, string, string[], () => string]> = [
    ['email', 'EMAIL', EMAIL_TEMPLATES, () => f.internet.email()],
    ['card', 'CREDIT_CARD', CARD_TEMPLATES, () => spacedCard(f)],
    [
      'iban',
      'IBAN',
      IBAN_TEMPLATES,
      () =>
        f.finance.iban({
          formatted: f.datatype.boolean(),
          countryCode: f.helpers.arrayElement(['DE', 'FR', 'GB', 'ES', 'IT', 'NL', 'PL', 'BE', 'PT']),
        }),
    ],
    ['ssn', 'NATIONAL_ID', ID_TEMPLATES.slice(0, 2), () => ssn(f)],
    ['nino', 'NATIONAL_ID', ID_TEMPLATES.slice(2, 3).concat(ID_TEMPLATES[4]), () => nino(f)],
    ['dni', 'NATIONAL_ID', ID_TEMPLATES.slice(3), () => dni(f)],
  ];
  for (const [group, type, templates, make] of types) {
    for (let i = 0; i < perType; i++) {
      const v = make();
      const { text, spans } = fill(f.helpers.arrayElement(templates), [[v, type]], f);
      items.push({ id: `${group}-${i}`, text, kind: 'positive', group, spans });
    }
  }
  for (const [group, makers] of Object.entries(NEGATIVES)) {
    for (let i = 0; i < negativesPerKind; i++) {
      items.push({
        id: `neg-${group}-${i}`,
        text: f.helpers.arrayElement(makers)(f),
        kind: 'hard_negative',
        group,
        spans: [],
      });
    }
  }
  return items;
}

/**
 * A small fixed subset for the CI regression test (test/plugins/classify-pii-eval.test.ts): the
 * first `per` items of each phone locale, of each other type and of each kind of hard negative.
 */
export function sampleOf(items: Item[], per = { phone: 6, other: 12, negative: 12 }): Item[] {
  const taken = new Map<string, number>();
  return items.filter((item) => {
    const key = item.group.startsWith('phone:') ? item.group.split(':').slice(0, 2).join(':') : item.group;
    const n = taken.get(key) ?? 0;
    const limit = item.kind === 'hard_negative' ? per.negative : key.startsWith('phone:') ? per.phone : per.other;
    if (n >= limit) return false;
    taken.set(key, n + 1);
    return true;
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const out = resolve(root, arg('--out') ?? '.data/detect/pii-eval.jsonl');
  const items = generatePiiSet({ seed: Number(arg('--seed') ?? 25) });
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${items.map((i) => JSON.stringify(i)).join('\n')}\n`);
  console.log(`${items.length} items → ${out}`);
  const sample = arg('--sample');
  if (sample) {
    const subset = sampleOf(items);
    writeFileSync(resolve(root, sample), `${subset.map((i) => JSON.stringify(i)).join('\n')}\n`);
    console.log(`${subset.length} items → ${sample}`);
  }
}
