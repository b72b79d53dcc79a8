/**
 * Phone numbers: a linear scanner finds runs of digits and the separators phone numbers use,
 * cuts each run into the candidate numbers it may hold, and Google's numbering-plan metadata
 * (libphonenumber-js) decides which of them are numbers: international ones (`+` or `00`) of any
 * country, national ones (no country code) of the configured regions.
 *
 * Why not the library's own text scanner (`findPhoneNumbersInText`): on runs of short digit
 * groups it spends ~100 µs per character (4 KB of `1 1 1 …` took 0.6 s here, 64 KB 5.7 s). Here
 * the scan is one pass, each candidate is bounded (at most WINDOW_TOKENS blank-separated tokens,
 * MAX_DIGITS digits, PHONE_MAX_CHARS characters) and only candidates of at least MIN_DIGITS
 * digits that pass the shape checks reach the library.
 *
 * A run is cut only where a number can end: after a token that is not a bare digit group
 * (`555-234-5678 555-987-6543`, `10001 555-234-5678`) or before a `+` or `(`. A run of bare
 * digit groups (`4111 1111 1111 1112`, `12 555 234 5678`) is one number or none: a phone number
 * inside a longer run of digits is not one. Whether a cut can end a number depends on the token
 * before it and on the first character after it only, so text that follows a number never turns
 * a number found without it into none (what `detectChars` promises: see classify-spans.test.ts).
 */
import {
  type CountryCode,
  getCountries,
  Metadata,
  type MetadataJson,
  type PhoneNumber,
  parsePhoneNumberFromString,
} from 'libphonenumber-js/core';
import minMetadata from 'libphonenumber-js/min/metadata';
import { type Detector, type Finding, type TextView, trailingRun } from './detector.ts';

export type { CountryCode };

/** National formats are recognised for these regions unless a classifier names its own. */
export const DEFAULT_PHONE_REGIONS: readonly CountryCode[] = [
  'US',
  'CA',
  'GB',
  'IE',
  'DE',
  'AT',
  'CH',
  'FR',
  'BE',
  'NL',
  'ES',
  'PT',
  'IT',
  'PL',
  'SE',
  'BR',
  'MX',
  'IN',
  'AU',
  'JP',
];

/** Fewest digits a candidate needs to reach the library (shorter local numbers are not looked at). */
export const MIN_DIGITS = 7;
/** E.164 allows 15 digits; `00` and a carrier code or a national prefix make room for two more. */
const MAX_DIGITS = 17;
/** Longest candidate: `+49 (0) 30 / 123 456 78` is 23; 32 leaves room for wider groupings. */
export const PHONE_MAX_CHARS = 32;
/** Most blank-separated tokens in one candidate (`+49 (0) 30 / 123 456 78` has 7). */
const WINDOW_TOKENS = 8;
/** Weight of a phone number: one weight for all, so a shorter text never finds a weaker one. */
const WEIGHT = 0.8;

// ---------------------------------------------------------------- characters

const isDigit = (c: number) => c >= 48 && c <= 57;
/** Characters of a token: digits and `+ ( ) - . /`. */
const isTokenChar = (c: number) => isDigit(c) || c === 43 || c === 40 || c === 41 || c === 45 || c === 46 || c === 47;
/** One blank between tokens: space, no-break space, narrow no-break space, thin space. */
const isBlank = (c: number) => c === 32 || c === 0xa0 || c === 0x202f || c === 0x2009;
const isPendingChar = (c: number) => isTokenChar(c) || isBlank(c) || c === 58 || c === 44;
const isNumberStart = (c: number) => isDigit(c) || c === 43 || c === 40;
const isLetter = (c: number) =>
  (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || (c >= 0xc0 && c !== 0xd7 && c !== 0xf7 && c < 0x2000);
/** Currency signs and the signs of codes, amounts and times that glue a token to what it is part of. */
const GLUE = new Set([...'$€£¥₹₽₩¢#@&*=%^~`|\\'].map((s) => s.charCodeAt(0)));

/**
 * A token glued to the character before it (`ab12`, `#123`, `$100`, the `30` of `10:30`, the
 * `234` of `1,234`) is part of a word, an amount or a time: no phone number starts there.
 */
function gluedLeft(text: string, start: number): boolean {
  if (start === 0) return false;
  const c = text.charCodeAt(start - 1);
  if (isLetter(c) || GLUE.has(c)) return true;
  if (c === 58 || c === 44) return start >= 2 && isDigit(text.charCodeAt(start - 2)); // 10:30, 1,234
  return false;
}

/** A token glued to what follows it (`12ab`, `12%`, `10:30`, `1,5`): the same. */
function gluedRight(text: string, end: number): boolean {
  if (end >= text.length) return false;
  const c = text.charCodeAt(end);
  if (isLetter(c) || GLUE.has(c)) return true;
  if (c === 58 || c === 44) return end + 1 < text.length && isDigit(text.charCodeAt(end + 1));
  return false;
}

// ---------------------------------------------------------------- runs and tokens

interface Token {
  start: number;
  end: number;
  /** Only digits. */
  bare: boolean;
  /** Glued to a word, an amount or a time: never part of a number. */
  glued: boolean;
  digits: number;
  first: number;
}

/** A joiner token between two groups (`030 / 1234567`, `555 - 1234`). */
const isJoiner = (text: string, t: Token) =>
  t.digits === 0 && t.end - t.start === 1 && (text.charCodeAt(t.start) === 45 || text.charCodeAt(t.start) === 47);

/** The token at `start` (a token character): where it ends, its digits. */
function tokenAt(text: string, start: number): Token {
  let end = start;
  let digits = 0;
  while (end < text.length && isTokenChar(text.charCodeAt(end))) {
    if (isDigit(text.charCodeAt(end))) digits++;
    end++;
  }
  // Bare: only digits, but for punctuation at its end that ends a sentence or the number
  // (`1234567.`, a `)` closing nothing of the token: `(call 1234567)`), so that the token is as
  // bare when the text stops before that punctuation.
  let opens = false;
  for (let i = start; i < end && !opens; i++) opens = text.charCodeAt(i) === 40;
  let last = end;
  while (last > start && !isDigit(text.charCodeAt(last - 1)) && (text.charCodeAt(last - 1) !== 41 || !opens)) last--;
  const bare = digits === last - start;
  return { start, end, bare, glued: false, digits, first: text.charCodeAt(start) };
}

/**
 * The run of tokens from the token holding the digit at `digit` (its start not before `floor`):
 * tokens separated by one blank, joiners merged into the pieces around them. Returns the pieces
 * (each one or more tokens) and where the run ends.
 */
function runAt(text: string, digit: number, floor: number): { pieces: Token[]; end: number } {
  let start = digit;
  while (start > floor && isTokenChar(text.charCodeAt(start - 1))) start--;
  const pieces: Token[] = [];
  let token = tokenAt(text, start);
  token.glued = gluedLeft(text, token.start) || gluedRight(text, token.end);
  pieces.push(token);
  let end = token.end;
  for (;;) {
    if (!(isBlank(text.charCodeAt(end)) && isTokenChar(text.charCodeAt(end + 1)))) break;
    token = tokenAt(text, end + 1);
    if (isJoiner(text, token)) {
      // `a / b`: the joiner and the token after it extend the piece before it.
      const at = token.end;
      if (!(isBlank(text.charCodeAt(at)) && isTokenChar(text.charCodeAt(at + 1)))) break;
      const next = tokenAt(text, at + 1);
      if (next.digits === 0) break;
      const last = pieces[pieces.length - 1];
      last.end = next.end;
      last.bare = false;
      last.digits += next.digits;
      last.glued ||= gluedRight(text, next.end);
      end = next.end;
      continue;
    }
    if (token.digits === 0) break;
    token.glued = gluedRight(text, token.end);
    pieces.push(token);
    end = token.end;
  }
  return { pieces, end };
}

/**
 * May a number end after piece `i` of a run (when another follows)? When the piece is more than
 * bare digits, or the next starts with `+` or `(`. Depends on the piece and the next one's first
 * character only, so that the text after a number cannot make it end where it could not before.
 */
const canEnd = (pieces: Token[], i: number) =>
  !pieces[i].bare || pieces[i + 1].first === 43 || pieces[i + 1].first === 40;
/**
 * May a number start at piece `i` (after another)? When either is more than bare digits, or it
 * starts with `+` or `(`; never right after a piece starting with `+` (a country code: the
 * number is that one, or none).
 */
const canStart = (pieces: Token[], i: number) =>
  pieces[i - 1].first !== 43 &&
  (!pieces[i - 1].bare || !pieces[i].bare || pieces[i].first === 43 || pieces[i].first === 40);

// ---------------------------------------------------------------- shape of one candidate

/** What a candidate holds: its digits, and whether it is international (`+`, or `00`). */
interface Shape {
  digits: string;
  plus: boolean;
}

/**
 * The candidate [start, end) as a phone number's shape, or undefined: an optional `+`, digit
 * groups, between two groups one separator (a blank, `-`, `.`, `/`, each with blanks around,
 * or a parenthesis with a blank), at most one kind of `-./`, parentheses around one group at
 * most once. Not dates, decimals, thousands, IP addresses, versions or ISBNs: with `-` or `.`, a
 * group of one digit only first (`1-800-…`); three groups in the order of a date; two groups
 * or four of at most three digits with dots; 1-2 digits then groups of three.
 */
function shapeOf(text: string, start: number, end: number): Shape | undefined {
  let i = start;
  let plus = false;
  if (text.charCodeAt(i) === 43) {
    plus = true;
    i++;
  }
  const groups: number[] = [];
  /** Whether the separator before each group (after the first) has one of -./ in it. */
  const marked: boolean[] = [];
  let digits = '';
  let kind = 0; // the one of - . / used
  let blanks = false;
  let parens = 0;
  let open = false;
  let sepStart = i;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (isDigit(c)) {
      let j = i;
      while (j < end && isDigit(text.charCodeAt(j))) j++;
      // The separator before this group: `)`? blank? one of -./ ? blank? `(`?
      if (groups.length > 0 || i > sepStart) {
        if (!separatorOk(text, sepStart, i, groups.length === 0)) return undefined;
        if (groups.length > 0) marked.push(/[-./]/.test(text.slice(sepStart, i)));
      }
      groups.push(j - i);
      digits += text.slice(i, j);
      i = j;
      sepStart = i;
      continue;
    }
    if (c === 40) {
      if (open || parens > 0) return undefined;
      open = true;
      parens++;
    } else if (c === 41) {
      if (!open) return undefined;
      open = false;
    } else if (c === 45 || c === 46 || c === 47) {
      if (kind !== 0 && kind !== c) return undefined;
      kind = c;
    } else if (isBlank(c)) {
      blanks = true;
    } else return undefined; // a second +
    i++;
  }
  if (open || sepStart !== end || groups.length === 0) return undefined;
  if (digits.length < MIN_DIGITS || digits.length > MAX_DIGITS) return undefined;
  const n = groups.length;
  // ISBN 978-3-16-148410-0, versions 10.0.19041.1234 and lists of small numbers have groups of
  // one digit; a phone number has one at most after the first (04992-2-1234, +61 7 0310 1335),
  // never last, and none in a dotted one.
  let ones = 0;
  for (let g = 1; g < n; g++) if (groups[g] === 1) ones++;
  if (groups[n - 1] === 1 || ones > 1 || (kind === 46 && ones > 0)) return undefined;
  // Four or more groups of three, six or more of one or two digits: a table of figures, a list,
  // a serial, not a national number (French numbers have five groups of two).
  if (!plus && n >= 4 && groups.every((g) => g === 3)) return undefined;
  if (!plus && n >= 6 && groups.every((g) => g <= 2)) return undefined;
  if (!plus && kind === 45 && n === 2 && groups[0] === 5 && groups[1] === 4) return undefined; // ZIP+4
  if (!plus && (kind === 45 || kind === 0) && n === 3 && groups[0] === 3 && groups[1] === 2 && groups[2] === 4)
    return undefined; // a US Social Security Number
  // A date, alone or before a time (01.02.2024 10.30).
  if (!plus && n >= 3 && marked[0] && marked[1] && isDateGroups(groups)) return undefined;
  if (kind === 46 && (n === 2 || (n === 4 && groups.every((g) => g <= 3)))) return undefined; // 48.858844, 192.168.1.20
  if (
    !plus &&
    n >= 3 &&
    groups[0] <= 2 &&
    groups.slice(1).every((g) => g === 3) &&
    (kind === 46 || (kind === 0 && blanks))
  )
    return undefined; // 12.345.678, 1 234 567
  return { digits, plus };
}

/**
 * The characters between two groups (or before the first one, after an optional `+`): `(` before
 * the first; otherwise `)`?, then a blank, or one of `-./` with a blank on either side or none,
 * then `(`?.
 */
function separatorOk(text: string, from: number, to: number, first: boolean): boolean {
  const s = text.slice(from, to);
  if (first) return s === '(';
  return (
    /^\)?(?:[ \u00a0\u202f\u2009]|[ \u00a0\u202f\u2009]?[-./][ \u00a0\u202f\u2009]?)?\(?$/.test(s) &&
    s !== '' &&
    s !== ')('
  );
}

/** dd-mm-yyyy, mm/dd/yy, yyyy-mm-dd: three groups whose sizes and values make a date. */
function isDateGroups(groups: number[]): boolean {
  const [a, b, c] = groups;
  return (a <= 2 && b <= 2 && (c === 2 || c === 4)) || (a === 4 && b <= 2 && c <= 2);
}

// ---------------------------------------------------------------- context

/**
 * Words before a number that say what it is. The nearest one within CONTEXT_CHARS decides: a
 * phone word (call, tel, mobile…) makes a bare run of digits a number; an id word (order,
 * invoice, account…) makes a national-format candidate none. `number`, `no`, `#` are neither:
 * the word before them decides ("phone number", "order number"), and alone they count as a
 * phone word ("my number is"). Words before another number are that number's ("Zip 10001 …").
 */
const PHONE_WORDS = new Set(
  (
    'phone phones telephone tel tel. telephone mobile mob cell cellphone call calls calling called ring dial text texting sms ' +
    'whatsapp signal telegram viber fax contact contacts reach reachable hotline helpline landline ph tlf tlph ' +
    'telefon telefonnummer handy handynummer rufnummer mobil anrufen rufen rufe ruf téléphone telephone portable appelez appeler ' +
    'joindre tél teléfono telefono móvil movil celular cel llamar llama llámame llamame telefone ligue ligar contato ' +
    'contacto contatto chiamare chiama cellulare zadzwoń zadzwon telefonu komórka komorka komórkowy numerem bel telefoonnummer ' +
    'gsm mobiel 電話 携帯 電話番号 연락처 телефон тел'
  ).split(' '),
);
const ID_WORDS = new Set(
  (
    'order orders invoice inv ref reference account acct iban isbn issn sku serial tracking ticket case id ids ' +
    's/n a/c po zip postal postcode version ver build patent lot batch item customer client booking confirmation ' +
    'transaction txn receipt policy claim member membership passport license licence ssn tax vat ein nif nip pesel ' +
    'dni nie cpf cnpj rg bsn codice fiscale steuernummer personnummer routing swift bic sort card visa mastercard ' +
    'amex pin otp code coupon voucher product model part article flight train room seat page pages chapter ' +
    'population total amount price cost balance km kg miles'
  ).split(' '),
);
const NEUTRAL_NUMBER = new Set(
  'number numbers no no. nr nr. num num. # n° nº numéro numero número nummer numer'.split(' '),
);
const CONTEXT_CHARS = 40;

type Context = 'phone' | 'id' | 'none';

/** The nearest telling word in the CONTEXT_CHARS before `start`. */
function contextBefore(text: string, start: number): Context {
  const before = text.slice(Math.max(0, start - CONTEXT_CHARS), start).toLowerCase();
  const words = before.split(/[^\p{L}\p{N}.#°º/]+/u).filter((w) => w.length > 0);
  // The first word may be cut by the window: it counts only whole.
  if (start - CONTEXT_CHARS > 0 && !/[^\p{L}\p{N}.#°º/]/u.test(before[0])) words.shift();
  let sawNumber = false;
  for (let k = words.length - 1; k >= 0; k--) {
    let w = words[k];
    if (/\d/.test(w)) break; // another number between: the words before it are about that one
    if (NEUTRAL_NUMBER.has(w)) {
      sawNumber = true;
      continue;
    }
    w = w.replace(/[./]+$/, '');
    if (ID_WORDS.has(w)) return 'id'; // s/n, a/c
    // tel/fax: the part nearest the number first.
    for (const part of w.split('/').reverse()) {
      if (PHONE_WORDS.has(part)) return 'phone';
      if (ID_WORDS.has(part)) return 'id';
    }
    if (NEUTRAL_NUMBER.has(w)) sawNumber = true;
  }
  return sawNumber ? 'phone' : 'none';
}

/** A currency sign or code right before the candidate (a blank between allowed): an amount. */
function amountBefore(text: string, start: number): boolean {
  let i = start;
  if (i > 0 && isBlank(text.charCodeAt(i - 1))) i--;
  if (i > 0 && GLUE.has(text.charCodeAt(i - 1))) return true;
  return /(?:^|[^A-Za-z])(?:USD|EUR|GBP|JPY|INR|CHF|CAD|AUD|BRL|PLN|MXN|SEK|Rs\.?|R\$)$/.test(
    text.slice(Math.max(0, i - 5), i),
  );
}

// ---------------------------------------------------------------- validation with the library

interface NumberingPlanView {
  possibleLengths(): number[] | undefined;
  nationalNumberPattern(): string;
  nationalPrefix(): string | undefined;
  nationalPrefixForParsing(): string | undefined;
  nationalPrefixIsOptionalWhenFormattingInNationalFormat(): boolean;
  formats(): Array<{
    pattern(): string;
    leadingDigitsPatterns(): string[];
    nationalPrefixFormattingRule(): string | undefined;
    nationalPrefixIsOptionalWhenFormattingInNationalFormat(): boolean;
    usesNationalPrefix(): boolean;
  }>;
}

/** What a region's numbering plan tells before parsing: the lengths a national number can have. */
interface Region {
  code: CountryCode;
  plan: NumberingPlanView;
  lengths: ReadonlySet<number>;
  /** The plan's national number pattern (every valid number's national significant number matches it). */
  pattern: RegExp;
  /** The national (trunk) prefix when it is all there is to strip (`0`, `1`); undefined otherwise. */
  simplePrefix?: string;
  /** National prefix parsing is more than a fixed prefix (carrier codes): lengths are not checked. */
  complex: boolean;
}

function regionOf(metadata: MetadataJson, code: CountryCode): Region {
  const m = new Metadata(metadata);
  m.selectNumberingPlan(code);
  const plan = m.numberingPlan as unknown as NumberingPlanView;
  const prefix = plan.nationalPrefix();
  const forParsing = plan.nationalPrefixForParsing();
  const complex = forParsing !== undefined && forParsing !== prefix;
  return {
    code,
    plan,
    lengths: new Set(plan.possibleLengths() ?? []),
    pattern: new RegExp(`^(?:${plan.nationalNumberPattern()})$`),
    simplePrefix: prefix,
    complex,
  };
}

/**
 * Could the national digits be a number of the region? A necessary condition of the library's
 * validation, checked without parsing: the national significant number (the digits, or the
 * digits less the national prefix) has one of the plan's possible lengths and matches its
 * national number pattern. Parsing costs tens of µs a region; this rules most regions out for
 * a few hundred ns. Regions whose prefix parsing is more than a fixed prefix (carrier codes) are
 * left to the library. `reference` skips it (tests check both agree).
 */
function mayFit(region: Region, digits: string): boolean {
  if (region.complex) return true;
  const p = region.simplePrefix;
  const fits = (nsn: string) => region.lengths.has(nsn.length) && region.pattern.test(nsn);
  return fits(digits) || (p !== undefined && digits.startsWith(p) && fits(digits.slice(p.length)));
}

/**
 * Written in national format, does the number carry the national prefix where its region writes
 * one? `20 7946 0958` is no London number (`020 7946 0958` is), `(11) 98765-4321` is one in
 * Brazil, where the prefix is optional. libphonenumber's VALID leniency (Java) checks this; the
 * JavaScript port leaves it out of its scanner, so it is done here from the same metadata.
 */
function nationalPrefixPresentIfRequired(phone: PhoneNumber, digits: string, region: Region): boolean {
  const nsn = phone.nationalNumber as string;
  const plan = region.plan;
  const format = plan.formats().find((f) => {
    const leading = f.leadingDigitsPatterns();
    if (leading.length > 0 && nsn.search(leading[leading.length - 1]) !== 0) return false;
    return new RegExp(`^(?:${f.pattern()})$`).test(nsn);
  });
  if (!format?.nationalPrefixFormattingRule()) return true;
  if (plan.nationalPrefixIsOptionalWhenFormattingInNationalFormat()) return true;
  if (format.nationalPrefixIsOptionalWhenFormattingInNationalFormat()) return true;
  if (!format.usesNationalPrefix()) return true;
  return digits.length > nsn.length; // something was stripped: the prefix (and a carrier code)
}

/**
 * Did the library read national digits as starting with the region's country calling code
 * written without its `+` (4930… in Germany as +49 30…)? A national format has no country code:
 * such digits are another number, or none (a 16-digit card number starting 49 is no German
 * phone). The library keeps how it found the code in `__countryCallingCodeSource` (its own
 * leniency checks read it).
 */
function readCountryCode(phone: PhoneNumber): boolean {
  const source = (phone as unknown as { __countryCallingCodeSource?: string }).__countryCallingCodeSource;
  return source === 'FROM_NUMBER_WITHOUT_PLUS_SIGN';
}

export interface PhoneValidator {
  /** Is the shape a phone number: international of any country, national of a region? */
  valid(shape: Shape, plain?: boolean): boolean;
}

/** Validation against the numbering plans of `metadata`, national formats for `regions`. */
export interface PhoneValidatorOptions {
  /** International numbers: `valid` (the numbering plan's patterns) or `possible` (a known country code and a possible length). */
  international?: 'valid' | 'possible';
}

export function phoneValidator(
  regions: readonly CountryCode[],
  metadata: MetadataJson = minMetadata,
  options: PhoneValidatorOptions = {},
): PhoneValidator {
  const possibleIntl = (options.international ?? 'possible') === 'possible';
  const plans = regions.map((code) => regionOf(metadata, code));
  const nanp = regions.some((r) => r === 'US' || r === 'CA');
  const cache = new Map<string, boolean>();
  const CACHE_MAX = 4096;

  const international = (digits: string) => {
    const phone = parsePhoneNumberFromString(`+${digits}`, metadata);
    return phone !== undefined && (possibleIntl ? phone.isPossible() : phone.isValid());
  };
  const national = (digits: string, plain: boolean) => {
    for (const region of plans) {
      if (!plain && !mayFit(region, digits)) continue;
      const phone = parsePhoneNumberFromString(digits, region.code, metadata);
      if (!phone?.isValid() || readCountryCode(phone)) continue;
      if (nationalPrefixPresentIfRequired(phone, digits, region)) return true;
    }
    return false;
  };
  const decide = (shape: Shape, plain: boolean) => {
    const { digits } = shape;
    if (shape.plus) return international(digits);
    // An international prefix: 00 (most of the world), 011 (North America); else (0116 in
    // Leicester) a national number.
    if (digits.startsWith('00') && international(digits.slice(2))) return true;
    if (nanp && digits.startsWith('011') && international(digits.slice(3))) return true;
    return national(digits, plain);
  };
  return {
    valid(shape, plain = false) {
      if (plain) return decide(shape, true);
      const key = (shape.plus ? '+' : '') + shape.digits;
      let verdict = cache.get(key);
      if (verdict === undefined) {
        verdict = decide(shape, false);
        if (cache.size >= CACHE_MAX) cache.clear();
        cache.set(key, verdict);
      }
      return verdict;
    },
  };
}

// ---------------------------------------------------------------- the scan

/**
 * The candidate of pieces [a, b]: where it starts and ends once punctuation around it is trimmed
 * (a trailing `.` ends a sentence, an unmatched `(` or `)` belongs to the text around), or
 * undefined when it cannot be a number (a glued piece, a leading minus).
 */
function bounds(text: string, pieces: Token[], a: number, b: number): { start: number; end: number } | undefined {
  for (let k = a; k <= b; k++) if (pieces[k].glued) return undefined;
  let start = pieces[a].start;
  let end = pieces[b].end;
  if (end - start > PHONE_MAX_CHARS + 8) return undefined; // too long even once trimmed
  if (text.charCodeAt(start) === 45) return undefined; // -74.0060: a negative number
  while (start < end && (text.charCodeAt(start) === 46 || text.charCodeAt(start) === 47)) start++;
  while (end > start) {
    const c = text.charCodeAt(end - 1);
    if (c === 46 || c === 45 || c === 47 || c === 40) end--;
    else break;
  }
  // Parentheses around the number ("(+44 20 7946 0958)", "((61) 11995-7063)") are the text's:
  // an unmatched one at either end, or a pair around all of it, is left out.
  let opens = count(text, start, end, 40);
  let closes = count(text, start, end, 41);
  while (opens > closes && text.charCodeAt(start) === 40) {
    start++;
    opens--;
  }
  while (closes > opens && text.charCodeAt(end - 1) === 41) {
    end--;
    closes--;
  }
  while (text.charCodeAt(start) === 40 && text.charCodeAt(end - 1) === 41 && enclosed(text, start, end)) {
    start++;
    end--;
  }
  return end - start <= PHONE_MAX_CHARS ? { start, end } : undefined;
}

/** Does the `(` at `start` close at `end - 1` (and not before)? */
function enclosed(text: string, start: number, end: number): boolean {
  let depth = 0;
  for (let i = start; i < end - 1; i++) {
    const c = text.charCodeAt(i);
    if (c === 40) depth++;
    else if (c === 41 && --depth === 0) return false;
  }
  return depth === 1;
}

/** How many times [start, end) holds the character `c` (bounded: a candidate is short). */
function count(text: string, start: number, end: number, c: number): number {
  let n = 0;
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === c) n++;
  return n;
}

/** Is the candidate [start, end) a phone number? Shape, context, then the library. */
function isPhone(text: string, start: number, end: number, bare: boolean, v: PhoneValidator, plain: boolean): boolean {
  const shape = shapeOf(text, start, end);
  if (shape === undefined) return false;
  if (amountBefore(text, start)) return false;
  if (!shape.plus) {
    const context = contextBefore(text, start);
    if (context === 'id') return false;
    if (bare && context !== 'phone') return false; // a bare run of digits is a number only when said to be
  }
  return v.valid(shape, plain);
}

/**
 * Phone numbers in `text`, the first digit at `from` or later (-1: none). Each run is cut at the places a number can
 * end; from each place a number can start (left to right), the longest candidate of at most
 * WINDOW_TOKENS pieces that is a number is reported and the search goes on after it.
 */
export function findPhones(text: string, from: number, v: PhoneValidator, plain = false): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  const digit = /\d/g;
  let floor = 0;
  digit.lastIndex = from;
  for (let m = digit.exec(text); m !== null; m = digit.exec(text)) {
    const { pieces, end } = runAt(text, m.index, floor);
    floor = end;
    digit.lastIndex = end;
    let total = 0;
    for (const p of pieces) total += p.digits;
    if (total < MIN_DIGITS) continue;
    const last = pieces.length - 1;
    for (let a = 0; a <= last; a++) {
      if (a > 0 && !canStart(pieces, a)) continue;
      let found = -1;
      let digits = 0;
      let b = a;
      // The furthest end within bounds, then back down to the first candidate that is a number.
      while (b < last && b - a + 1 < WINDOW_TOKENS && digits + pieces[b].digits + pieces[b + 1].digits <= MAX_DIGITS) {
        digits += pieces[b].digits;
        b++;
      }
      for (; b >= a; b--) {
        if (b < last && !canEnd(pieces, b)) continue;
        const range = bounds(text, pieces, a, b);
        if (range === undefined) continue;
        const bare = a === b && pieces[a].bare;
        if (isPhone(text, range.start, range.end, bare, v, plain)) {
          out.push({ start: range.start, end: range.end, label: 'PHONE', weight: WEIGHT });
          found = b;
          break;
        }
      }
      if (found >= 0) a = found;
    }
  }
  return out;
}

/** The phone detector for `regions` (national formats), with prefilters in `find`, plain in `reference`. */
export function phoneDetector(
  regions: readonly CountryCode[] = DEFAULT_PHONE_REGIONS,
  metadata: MetadataJson = minMetadata,
  firstDigit: (view: TextView) => number = (view) => view.text.search(/\d/),
  options: PhoneValidatorOptions = {},
): Detector {
  const validator = phoneValidator(regions, metadata, options);
  return {
    id: 'phone',
    trigger: { chars: '0123456789' },
    family: 'pii',
    description:
      'Phone number validated against its numbering plan (libphonenumber): international (+ or 00) of any country, national formats of the configured regions.',
    maxSpanChars: PHONE_MAX_CHARS,
    detectChars: PHONE_MAX_CHARS, // the whole number: its digits decide
    find: (view) => findPhones(view.text, firstDigit(view), validator),
    reference: (view) => findPhones(view.text, 0, validator, true),
    // The current run of number characters and single blanks from a digit, `+` or `(`; `:` and
    // `,` too, which glue a number to digits after them (10:30). A number is at most
    // PHONE_MAX_CHARS; two more for what decides whether it is glued.
    pendingFrom: (view) => trailingRun(view.text, isPendingChar, isNumberStart, PHONE_MAX_CHARS + 2),
  };
}

/** Region codes the metadata knows (for the config schema). */
export const PHONE_REGION_CODES: readonly string[] = getCountries(minMetadata);
