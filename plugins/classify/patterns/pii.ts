/**
 * PII detectors: e-mail addresses, phone numbers, payment card numbers, IBANs and national
 * identifiers. Candidates are found with linear regexes and then validated (Luhn, mod-97, control
 * letters, issuing ranges, numbering plans), so that look-alike numbers (order ids, dates,
 * versions) are not flagged. Phone numbers: phone.ts.
 */
import { IBAN_LENGTHS, ibanChecksumValid, luhnValid, ninoPrefixValid, spanishIdValid, ssnValid } from './checksums.ts';
import {
  type Anchor,
  type Detector,
  type Finding,
  findAll,
  firstAnchor,
  prefixFrom,
  pushFinding,
  type TextView,
  trailingRun,
} from './detector.ts';
import { DEFAULT_PHONE_REGIONS, phoneDetector } from './phone.ts';

const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
/** Characters of an e-mail local part (the common unquoted subset of RFC 5322). */
const isLocalChar = (c: number) => isAlnum(c) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45 || c === 39;
/** Characters of an address, local part, `@` and domain (whose characters the local part allows). */
const isAddressChar = (c: number) => isLocalChar(c) || c === 64;
const isDigitCode = (c: number) => c >= 48 && c <= 57;

/**
 * Where the first digit is (-1: none). Every detector but e-mail needs digits, and ordinary prose
 * has none, so they skip it: each starts its search a few characters before the first digit.
 */
const DIGITS: Anchor[] = [...'0123456789'].map((d) => [d, 0]);
const firstDigit = (view: TextView) => firstAnchor(view.text, DIGITS);
/** Where a pattern whose matches have a digit at most `before` characters in can start. */
function fromDigit(view: TextView, before: number): number {
  const digit = view.derived(firstDigit);
  return digit === -1 ? -1 : Math.max(0, digit - before);
}

// ---------------------------------------------------------------- e-mail

/** Domain after the `@`: dot-separated labels (no leading/trailing hyphen) and an alphabetic TLD. */
const EMAIL_DOMAIN = /(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])/y;
/**
 * The longest address: RFC 5321 (4.5.3.1.3) allows a path of 256 octets, angle brackets
 * included. The pattern allows more (a 64-character local part and 8 labels of 63): such a match
 * is not an address anyone can use, and is reported in pieces of 254.
 */
const EMAIL_MAX = 254;

/** Numbers (cards, IBANs, SSNs, NINOs, DNIs, phones) have ASCII digits in an ASCII text (Detector.trigger). */
export const DIGIT_TRIGGER = { chars: '0123456789' } as const;

const email: Detector = {
  id: 'email',
  trigger: { chars: '@' },
  family: 'pii',
  description: 'E-mail address: local part, @, domain with a top-level domain of letters.',
  maxSpanChars: EMAIL_MAX,
  // The whole address: its end (a top-level domain of letters) makes it one. A cut inside it may
  // still hold a shorter address, or none (`a@b.c1d.io` cut anywhere before its end).
  detectChars: EMAIL_MAX,
  // Anchored on each `@` (scanning left at most 64 characters), so a long run of word characters
  // without an `@` costs nothing.
  find(view) {
    const text = view.text;
    const out: Finding[] = [];
    let floor = 0;
    for (let at = text.indexOf('@'); at >= 0; at = text.indexOf('@', at + 1)) {
      let start = at;
      while (start > floor && at - start < 64 && isLocalChar(text.charCodeAt(start - 1))) start--;
      while (start < at && text.charCodeAt(start) === 46) start++; // no leading dot
      if (start === at || text.charCodeAt(at - 1) === 46) continue;
      EMAIL_DOMAIN.lastIndex = at + 1;
      const m = EMAIL_DOMAIN.exec(text);
      if (!m) continue;
      const end = at + 1 + m[0].length;
      pushFinding(out, start, end, 'EMAIL', 0.9, EMAIL_MAX);
      floor = end;
      at = end - 1;
    }
    return out;
  },
  // The current run of address characters (local part, @, domain): it may become an address or
  // a longer one. Not bounded: a local part of 64 and 8 labels of 63 make a longer match.
  pendingFrom: (view) => trailingRun(view.text, isAddressChar),
};

// ---------------------------------------------------------------- phone

/** Phone numbers (phone.ts), national formats of the default regions; a classifier may name others. */
const phone: Detector = phoneDetector(DEFAULT_PHONE_REGIONS, undefined, (view) => view.derived(firstDigit));

// ---------------------------------------------------------------- payment cards

const CARD_CANDIDATE = /(?<![\d+-])\d(?:[ -]?\d){12,18}(?!\d)/g;
/** Issuer ranges and lengths: Visa, Mastercard, Amex, Diners, Discover, JCB, UnionPay, Maestro. */
const CARD_ISSUER =
  /^(?:4\d{12}(?:\d{3}){0,2}|5[1-5]\d{14}|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)\d{12}|3[47]\d{13}|3(?:0[0-5]\d|[689]\d\d)\d{10,15}|6(?:011|5\d\d|4[4-9]\d|22\d)\d{12,15}|35(?:2[89]|[3-8]\d)\d{12,15}|62\d{14,17}|(?:5018|5020|5038|5893|6304|6759|676[1-3])\d{8,15})$/;

const creditCard: Detector = {
  id: 'credit_card',
  trigger: DIGIT_TRIGGER,
  family: 'pii',
  description: 'Payment card number: 13-19 digits (spaces or dashes allowed), a known issuer range, Luhn check.',
  maxSpanChars: 19 + 18, // 19 digits, a separator between each two
  detectChars: 19 + 18, // the whole number: length and Luhn digit
  find: (view) => findAll(view.text, CARD_CANDIDATE, 'CREDIT_CARD', 0.95, cardIn, fromDigit(view, 0)),
  reference: (view) => findAll(view.text, CARD_CANDIDATE, 'CREDIT_CARD', 0.95, cardIn),
  // The current run of digits and separators from a digit: more digits make a card of it or undo
  // one (a 17th digit). A candidate is at most 37 characters; one more for the look-ahead.
  pendingFrom: (view) => trailingRun(view.text, isCardChar, isDigitCode, 19 + 18 + 1),
};
const isCardChar = (c: number) => isDigitCode(c) || c === 32 || c === 45;

/**
 * The card in a candidate digit run: the whole run, else the longest run of whole digit groups
 * that is one, so that a trailing or leading group ("4111 1111 1111 1111 1") cannot hide a card
 * (the candidate regex is greedy: its 17 digits fail the check and it would not backtrack). At
 * most 19 groups: a bounded number of windows per candidate, linear overall.
 */
function cardIn(m: RegExpExecArray): { start: number; end: number } | false {
  const groups: Array<{ start: number; end: number }> = [];
  const run = /\d+/g;
  for (let g = run.exec(m[0]); g !== null; g = run.exec(m[0]))
    groups.push({ start: g.index, end: g.index + g[0].length });
  let best: { start: number; end: number } | undefined;
  for (let i = 0; i < groups.length; i++) {
    for (let j = groups.length - 1; j >= i; j--) {
      const start = groups[i]!.start;
      const end = groups[j]!.end;
      if (best && end - start <= best.end - best.start) break;
      if (isCard(m[0].slice(start, end))) best = { start, end };
    }
  }
  return best ? { start: m.index + best.start, end: m.index + best.end } : false;
}

function isCard(text: string): boolean {
  const separators = new Set(text.replace(/\d/g, ''));
  if (separators.size > 1) return false;
  const digits = text.replace(/\D/g, '');
  return digits.length >= 13 && digits.length <= 19 && CARD_ISSUER.test(digits) && luhnValid(digits);
}

// ---------------------------------------------------------------- IBAN

const IBAN_START = /(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}/g;

const iban: Detector = {
  id: 'iban',
  trigger: DIGIT_TRIGGER,
  family: 'pii',
  description: 'IBAN: country code, check digits and the country’s BBAN length (spaces allowed), mod-97 check.',
  // The longest IBAN (33 characters) with a space before each character after the first four.
  maxSpanChars: 2 * Math.max(...IBAN_LENGTHS.values()) - 4,
  detectChars: 2 * Math.max(...IBAN_LENGTHS.values()) - 4, // the whole IBAN: length and mod-97
  find: (view) => findIbans(view.text, fromDigit(view, 2)),
  reference: (view) => findIbans(view.text, 0),
  pendingFrom: (view) => ibanPending(view.text),
};

/** The longest IBAN candidate: 33 characters with a space between each two after the first four. */
const IBAN_SPAN = 2 * Math.max(...IBAN_LENGTHS.values()) - 3;

/**
 * The earliest word start, at most IBAN_SPAN back, from which the rest of the text is a prefix
 * of an IBAN candidate: one or two letters, then two digits, then letters, digits and single
 * spaces (a complete IBAN too: one more character undoes it).
 */
function ibanPending(text: string): number {
  const end = text.length;
  let run = end;
  let digit = false;
  for (; run > 0 && end - run < IBAN_SPAN; run--) {
    const c = text.charCodeAt(run - 1);
    if (isDigitCode(c)) digit = true;
    else if (!isAlnum(c) && c !== 32) break;
  }
  // A prefix of three characters or more has digits (its third and fourth): in prose, only the last word's end.
  if (!digit) run = Math.max(run, end - 2);
  for (let s = run; s < end; s++) {
    if (!isLetterCode(text.charCodeAt(s)) || (s > 0 && isAlnum(text.charCodeAt(s - 1)))) continue;
    if (ibanPrefixAt(text, s)) return s;
  }
  return end;
}

function ibanPrefixAt(text: string, start: number): boolean {
  for (let k = start; k < text.length; k++) {
    const c = text.charCodeAt(k);
    const at = k - start;
    if (at < 2 ? !isLetterCode(c) : at < 4 ? !isDigitCode(c) : c === 32 ? text.charCodeAt(k - 1) === 32 : !isAlnum(c)) {
      return false;
    }
  }
  return true;
}
const isLetterCode = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

function findIbans(text: string, from: number): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  IBAN_START.lastIndex = from;
  for (let m = IBAN_START.exec(text); m !== null; m = IBAN_START.exec(text)) {
    const length = IBAN_LENGTHS.get(m[0].slice(0, 2).toUpperCase());
    if (length === undefined) continue;
    let compact = m[0].toUpperCase();
    let pos = m.index + 4;
    while (compact.length < length && pos < text.length) {
      const c = text.charCodeAt(pos);
      if (isAlnum(c)) compact += text[pos].toUpperCase();
      else if (!(c === 32 && isAlnum(text.charCodeAt(pos - 1)) && isAlnum(text.charCodeAt(pos + 1)))) break;
      pos++;
    }
    if (compact.length !== length || isAlnum(text.charCodeAt(pos)) || !ibanChecksumValid(compact)) continue;
    out.push({ start: m.index, end: pos, label: 'IBAN', weight: 0.95 });
    IBAN_START.lastIndex = pos;
  }
  return out;
}

// ---------------------------------------------------------------- national identifiers

// Both separators captured and compared in isSsn, not by a backreference: a regex without one can
// run on a linear-time engine (docs/classifiers.md, "Linear time").
const SSN = /(?<![\d-])(\d{3})([- ])(\d{2})([- ])(\d{4})(?![\d-])/g;
const NINO = /(?<![A-Za-z0-9])([A-Za-z]{2}) ?(\d{2}) ?(\d{2}) ?(\d{2}) ?([A-Da-d])(?![A-Za-z0-9])/g;
const DNI = /(?<![A-Za-z0-9])([XYZxyz]?)(\d{7,8})[- ]?([A-Za-z])(?![A-Za-z0-9])/g;

const usSsn: Detector = {
  id: 'us_ssn',
  trigger: DIGIT_TRIGGER,
  family: 'pii',
  description: 'US Social Security Number written 123-45-6789 or 123 45 6789, outside the never-issued ranges.',
  maxSpanChars: 11,
  detectChars: 11,
  find: (view) => findAll(view.text, SSN, 'NATIONAL_ID', 0.85, isSsn, fromDigit(view, 0)),
  reference: (view) => findAll(view.text, SSN, 'NATIONAL_ID', 0.85, isSsn),
  pendingFrom: (view) => trailingRun(view.text, isCardChar, isDigitCode, 11 + 1),
};
const isSsn = (m: RegExpExecArray) => m[2] === m[4] && ssnValid(m[1], m[3], m[5]);

const ukNino: Detector = {
  id: 'uk_nino',
  trigger: DIGIT_TRIGGER,
  family: 'pii',
  description: 'UK National Insurance number (AB 12 34 56 C) with a prefix HMRC allocates; it has no check digit.',
  maxSpanChars: 13,
  detectChars: 13,
  find: (view) => findAll(view.text, NINO, 'NATIONAL_ID', 0.8, isNino, fromDigit(view, 3)),
  reference: (view) => findAll(view.text, NINO, 'NATIONAL_ID', 0.8, isNino),
  pendingFrom: (view) => (ninoMayEnd(view.text) ? prefixFrom(view.text, NINO_PREFIX, 13 + 1) : view.text.length),
};
/** Every prefix of a number that reaches the end of the text (a whole one too: a letter after it undoes it). */
const NINO_PREFIX =
  /(?<![A-Za-z0-9])[A-Za-z](?:[A-Za-z](?: ?(?:\d(?:\d(?: ?(?:\d(?:\d(?: ?(?:\d(?:\d(?: ?[A-Da-d]?)?)?)?)?)?)?)?)?)?)?)?$/g;

/**
 * False when no NINO_PREFIX match can end the text, from its last characters (a stream asks at
 * every check; the regex only where this says maybe). A match is one or two letters after a
 * non-alphanumeric, then at most 10 digits and spaces, or ends in the suffix letter after one.
 */
function ninoMayEnd(text: string): boolean {
  const k = text.length;
  const c = text.charCodeAt(k - 1);
  if (isLetterCode(c)) return !(isLetterCode(text.charCodeAt(k - 2)) && isAlnum(text.charCodeAt(k - 3)));
  let j = k;
  while (j > 0 && k - j <= 10 && (isDigitCode(text.charCodeAt(j - 1)) || text.charCodeAt(j - 1) === 32)) j--;
  if (j === k) return false; // neither a letter, a digit nor a space
  return (
    isLetterCode(text.charCodeAt(j - 1)) && isLetterCode(text.charCodeAt(j - 2)) && !isAlnum(text.charCodeAt(j - 3))
  );
}
const isNino = (m: RegExpExecArray) => ninoPrefixValid(m[1].toUpperCase());

const esDni: Detector = {
  id: 'es_dni',
  trigger: DIGIT_TRIGGER,
  family: 'pii',
  description: 'Spanish DNI (8 digits) or NIE (X/Y/Z and 7 digits) with its mod-23 control letter.',
  maxSpanChars: 10, // 8 digits (or X/Y/Z and 7), a separator, the letter
  detectChars: 10, // the whole number: the control letter comes last
  find: (view) => findAll(view.text, DNI, 'NATIONAL_ID', 0.9, isDni, fromDigit(view, 1)),
  reference: (view) => findAll(view.text, DNI, 'NATIONAL_ID', 0.9, isDni),
  pendingFrom: (view) => (dniMayEnd(view.text) ? prefixFrom(view.text, DNI_PREFIX, 10 + 1) : view.text.length),
};
/** Every prefix of a DNI or NIE that reaches the end of the text (a whole one too). */
const DNI_PREFIX = /(?<![A-Za-z0-9])(?:[XYZxyz]|[XYZxyz]?\d{1,8}(?:[- ]?[A-Za-z]?)?)$/g;

/**
 * False when no DNI_PREFIX match can end the text, from its last two characters: a letter ends
 * one after a digit or a separator, or is X, Y or Z after a non-alphanumeric; a separator follows
 * a digit.
 */
function dniMayEnd(text: string): boolean {
  const c = text.charCodeAt(text.length - 1);
  const before = text.charCodeAt(text.length - 2);
  if (isLetterCode(c)) return !isLetterCode(before);
  if (c === 32 || c === 45) return isDigitCode(before);
  return isDigitCode(c);
}

function isDni(m: RegExpExecArray): boolean {
  if (m[2].length !== (m[1] ? 7 : 8)) return false;
  return spanishIdValid((m[1] + m[2] + m[3]).toUpperCase());
}

export const piiDetectors: Detector[] = [email, phone, creditCard, iban, usSsn, ukNino, esDni];
