/**
 * Secret detectors: the provider key formats (key-formats.ts, one detector each), JWTs, PEM
 * private keys, bearer credentials, generic `api_key = "..."` style assignments whose value looks
 * random, and credentials known by their context (credentials.ts: connection strings, `curl -u`,
 * vendor keywords, a value after "password is"). Each search starts at a literal its matches
 * contain (an anchor, found with indexOf) and skips the text when there is none.
 */
import { shannonEntropy } from './checksums.ts';
import { credentialDetectors } from './credentials.ts';
import {
  type Detector,
  type Finding,
  findAll,
  firstAnchor,
  pushFinding,
  type TextView,
  trailingRun,
} from './detector.ts';
import { failedFormat, keyDetectors } from './key-detectors.ts';
import { isPlaceholder } from './placeholders.ts';

/**
 * The characters of a credential-like token: anything but blanks, quotes and the punctuation that
 * ends a value. Every secret's span is a run of them (a key, a token, a value), so a stream holds
 * the current run: it may become a key, or a longer one.
 */
const isTokenChar = (c: number) =>
  c > 32 &&
  c !== 34 && // "
  c !== 39 && // '
  c !== 96 && // `
  c !== 44 && // ,
  c !== 59 && // ;
  c !== 40 && // (
  c !== 41 && // )
  c !== 123 && // {
  c !== 125 && // }
  c !== 91 && // [
  c !== 93 && // ]
  c !== 60 && // <
  c !== 62 && // >
  c !== 0x2028 &&
  c !== 0x2029 &&
  !(c >= 0x2000 && c <= 0x200a) &&
  c !== 0x85 &&
  c !== 0xa0 &&
  c !== 0x3000 &&
  c !== 0xfeff &&
  c !== 0x1680 &&
  c !== 0x202f &&
  c !== 0x205f;
const tokenRun = (view: TextView) => trailingRun(view.text, isTokenChar);
/**
 * Where the current token-like run starts (see isTokenChar), once per text for the whole family:
 * the release point (Detector.pendingFrom) of any detector whose span is such a run.
 */
export const tokenPending = (view: TextView): number => view.derived(tokenRun);

// ---------------------------------------------------------------- JWT

const JWT = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;
/**
 * The longest JWT reported as one span. A JWT has no length limit; in an HTTP header it is held to
 * the server's header-line limit (8 KiB in nginx and Apache by default), and the usual ones are
 * far shorter than 4096 (a few hundred characters to 2-3 KB with many claims). A longer token is
 * reported in pieces.
 */
const JWT_MAX = 4096;
/**
 * How much of a JWT is seen before it is reported (detectChars). The pattern needs the whole
 * header, the payload and the second dot, which have no length limit; a stream cannot wait for
 * them, so a token the end of the text cuts short is reported too (openJwt): once its payload has
 * begun after a header with `alg`, or once 256 characters of it are there (headers with an `x5c`
 * chain or a `jwk` are longer than that).
 */
const JWT_DETECT = 256;

const jwt: Detector = {
  id: 'jwt',
  // Its header, whole or cut short, starts with `eyJ`.
  trigger: { words: ['eyJ'] },
  family: 'secrets',
  description: 'JSON Web Token: three base64url parts whose header decodes to JSON with an "alg".',
  maxSpanChars: JWT_MAX,
  detectChars: JWT_DETECT,
  find: (view) => findJwts(view.text, firstAnchor(view.text, [['J', 2]]), view.open),
  reference: (view) => findJwts(view.text, 0, view.open),
  pendingFrom: tokenPending,
};

/** `open`: the text may go on (TextView.open), so a token it cuts short is held, not reported. */
function findJwts(text: string, from: number, open: boolean): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  let searched = from; // the end of the pattern's last match, a token or not
  JWT.lastIndex = from;
  for (let m = JWT.exec(text); m !== null; m = JWT.exec(text)) {
    searched = m.index + m[0].length;
    if (hasJwtHeader(m[0].slice(0, m[0].indexOf('.')))) pushFinding(out, m.index, searched, 'TOKEN', 0.9, JWT_MAX);
  }
  const cut = open ? -1 : openJwt(text, searched);
  if (cut >= 0) pushFinding(out, cut, text.length, 'TOKEN', 0.9, JWT_MAX);
  return out;
}

function hasJwtHeader(header: string): boolean {
  try {
    const decoded = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'));
    return typeof decoded === 'object' && decoded !== null && typeof decoded.alg === 'string';
  } catch {
    return false;
  }
}

const isBase64url = (c: number) =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 45;

/**
 * Where a JWT that the end of the text cuts short starts (-1: none), at or after `after` (what the
 * pattern matched is its own). Such a text is what a stream window ending inside a token holds:
 *
 * - `<header>.eyJ…`, the header passing hasJwtHeader: the second dot has not come yet;
 * - `eyJ…`, `eyJ….`, `eyJ….e` or `eyJ….ey`, at least JWT_DETECT characters, whose first run
 *   decodes to text (no control bytes but JSON's blanks, as in every header JSON.parse accepts):
 *   a header, maybe, too long to wait for.
 *
 * A whole text changes only where it ends so; a complete token is found by the pattern as before.
 */
function openJwt(text: string, after: number): number {
  const end = text.length;
  let run = end; // the start of the last run of base64url characters (may be empty)
  while (run > 0 && isBase64url(text.charCodeAt(run - 1))) run--;
  if (run > 0 && text.charCodeAt(run - 1) === 46) {
    let header = run - 1;
    while (header > 0 && isBase64url(text.charCodeAt(header - 1))) header--;
    if (header >= after && run - 1 - header >= 8 && text.startsWith('eyJ', header)) {
      const encoded = text.slice(header, run - 1);
      const payload = text.slice(run);
      if (payload.startsWith('eyJ') && hasJwtHeader(encoded)) return header;
      if ('ey'.startsWith(payload) && end - header >= JWT_DETECT && decodesToText(encoded)) return header;
    }
  }
  if (run >= after && end - run >= JWT_DETECT && text.startsWith('eyJ', run) && decodesToText(text.slice(run))) {
    return run;
  }
  return -1;
}

/** Whether base64url decodes to bytes with no control character but tab, line feed and carriage return. */
function decodesToText(encoded: string): boolean {
  for (const b of Buffer.from(encoded, 'base64url')) {
    if (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d) return false;
  }
  return true;
}

// ---------------------------------------------------------------- PEM private keys

const PEM_BEGIN = /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
const PEM_END = /-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/y;
/** The body of a block cut short: the lines of base64 that follow. */
const PEM_BODY = /[\r\n]*(?:[A-Za-z0-9+/=]+\r?\n)*[A-Za-z0-9+/=]*/y;
/**
 * The longest PEM block reported as one span: an RSA-4096 key, the largest in common use, takes
 * about 3.2-3.4k characters in its encodings (PKCS#1, PKCS#8, encrypted, OpenSSH); EC, Ed25519
 * and DSA keys far less. A longer block (an RSA-8192 key, a PGP key with subkeys) is reported in
 * pieces.
 */
const PEM_MAX = 4096;
/**
 * How much of a block is seen before it is reported (detectChars): its BEGIN line, which alone is
 * reported (a block cut short). The pattern allows words of any length before PRIVATE KEY; real
 * ones have at most 9 letters (ENCRYPTED), so a BEGIN line of words of up to 16 characters is
 * waited for: `-----BEGIN `, 3 × (16 and a space), `PRIVATE KEY BLOCK-----`. A longer one that the
 * end of the text cuts short is reported from there on (openBeginLine).
 */
const PEM_DETECT = 11 + 3 * (16 + 1) + 22;
/** What the end of a text cut inside a BEGIN line holds: a prefix of one (see openBeginLine). */
const PEM_BEGIN_OPEN =
  /-----BEGIN (?:[A-Z0-9]+ ){0,3}(?:[A-Z0-9]*|PRIVATE (?:KEY(?:-{1,4}| (?:BLOCK-{0,4}|BLOC|BLO|BL|B)?)?|KE|K)?)$/y;

const privateKey: Detector = {
  id: 'private_key',
  trigger: { chars: '-' },
  family: 'secrets',
  description: 'PEM private key block (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP), up to its END line.',
  maxSpanChars: PEM_MAX,
  detectChars: PEM_DETECT,
  find: (view) => findPrivateKeys(view.text, view.text.indexOf('-----BEGIN '), view.open),
  reference: (view) => findPrivateKeys(view.text, 0, view.open),
  pendingFrom: (view) => pemPending(view.text),
};

/**
 * A private key is pending from its BEGIN line until a whole END line follows (its body may go
 * on), from an unfinished BEGIN line (it may become one), or from a trailing start of one
 * (`-----BEG`). A whole BEGIN line of something else (a certificate) holds nothing.
 */
function pemPending(text: string): number {
  let pending = text.length;
  const last = text.charCodeAt(text.length - 1);
  // Only a text ending in one of `-BEGIN`'s characters can end in a start of one.
  if (last === 45 || last === 66 || last === 69 || last === 71 || last === 73 || last === 78) {
    for (let k = Math.min(text.length, 10); k > 0; k--) {
      if (text.startsWith(BEGIN_STARTS[k], text.length - k)) {
        pending = text.length - k;
        break;
      }
    }
  }
  const first = text.indexOf('-----BEGIN ');
  if (first === -1) return pending;
  // Every BEGIN line before the last whole END line is closed by one.
  let closed = first;
  for (let at = text.indexOf('-----END ', first); at !== -1; at = text.indexOf('-----END ', at + 1)) {
    PEM_END.lastIndex = at;
    const m = PEM_END.exec(text);
    if (m) closed = at + m[0].length;
  }
  PEM_BEGIN.lastIndex = closed;
  const open = PEM_BEGIN.exec(text);
  if (open) return Math.min(pending, open.index);
  const lastBegin = text.lastIndexOf('-----BEGIN ');
  PEM_BEGIN_OPEN.lastIndex = lastBegin;
  if (lastBegin >= closed && PEM_BEGIN_OPEN.test(text)) return Math.min(pending, lastBegin);
  return pending;
}
/** `-----BEGIN`'s first k characters, by k. */
const BEGIN_STARTS = Array.from({ length: 11 }, (_, k) => '-----BEGIN'.slice(0, k));

function findPrivateKeys(text: string, from: number, open: boolean): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  // The first `-----END ` at or after the block's body, and the end of the END line there (-1:
  // not one), kept from block to block: blocks come in order, so the text after them is searched
  // once however many BEGIN lines lack an END (searching it again for each was quadratic).
  let endAt = -2; // -2: not searched yet; -1: none left
  let endLineEnd = -1;
  let last = from; // the end of the last block
  PEM_BEGIN.lastIndex = from;
  for (let m = PEM_BEGIN.exec(text); m !== null; m = PEM_BEGIN.exec(text)) {
    const bodyStart = m.index + m[0].length;
    if (endAt !== -1 && endAt < bodyStart) {
      endAt = text.indexOf('-----END ', bodyStart);
      PEM_END.lastIndex = endAt;
      const endLine = endAt >= 0 ? PEM_END.exec(text) : null;
      endLineEnd = endLine ? endAt + endLine[0].length : -1;
    }
    let end: number;
    if (endLineEnd >= 0) end = endLineEnd;
    else {
      // No END line (truncated paste): mask the body that follows.
      PEM_BODY.lastIndex = bodyStart;
      end = bodyStart + (PEM_BODY.exec(text)?.[0].length ?? 0);
    }
    pushFinding(out, m.index, end, 'PRIVATE_KEY', 1, PEM_MAX);
    PEM_BEGIN.lastIndex = end;
    last = end;
  }
  const cut = open ? -1 : openBeginLine(text, last);
  if (cut >= 0) pushFinding(out, cut, text.length, 'PRIVATE_KEY', 1, PEM_MAX);
  return out;
}

/**
 * Where a BEGIN line of a private key that the end of the text cuts short starts, once it is
 * PEM_DETECT characters long (-1: none): only a line with a word longer than any key type's gets
 * there unfinished. A whole text changes only where it ends so.
 */
function openBeginLine(text: string, after: number): number {
  const at = text.lastIndexOf('-----BEGIN ');
  if (at < after || text.length - at < PEM_DETECT) return -1;
  PEM_BEGIN_OPEN.lastIndex = at;
  return PEM_BEGIN_OPEN.test(text) ? at : -1;
}

// ---------------------------------------------------------------- bearer tokens and assignments

const BEARER = /(?<![A-Za-z0-9])Bearer[ \t]+([A-Za-z0-9._~+/-]{20,2048}=*)(?![A-Za-z0-9._~+/=-])/g;
/**
 * The span is the credential: 2048 token characters and base64 padding (2 `=`). RFC 6750 allows
 * any number of `=`: a value with more is reported in pieces.
 */
const BEARER_MAX = 2048 + 2;
/**
 * How much of a credential is seen before it is reported (detectChars). Its entropy is judged on
 * the whole value, and a prefix of a random-looking one need not look random (`aaaa…` then random
 * characters); a stream cannot wait for 2 KB, so a credential the end of the text cuts short is
 * reported without the entropy check once it has 256 characters.
 */
const BEARER_DETECT = 256;

const bearerToken: Detector = {
  id: 'bearer_token',
  // The credential is 20+ token characters (256 when cut short).
  trigger: { run: 20 },
  family: 'secrets',
  description: 'HTTP bearer credential ("Bearer <20+ characters>") with a random-looking value.',
  maxSpanChars: BEARER_MAX,
  detectChars: BEARER_DETECT,
  find: (view) =>
    findAll(
      view.text,
      BEARER,
      'TOKEN',
      0.8,
      bearerValue(view.text.length, view.open),
      firstAnchor(view.text, [['Bearer', 0]]),
      BEARER_MAX,
    ),
  reference: (view) =>
    findAll(view.text, BEARER, 'TOKEN', 0.8, bearerValue(view.text.length, view.open), 0, BEARER_MAX),
  pendingFrom: tokenPending,
};

/**
 * The credential of a match in a text of `length` characters, if it looks random or may still
 * (see BEARER_DETECT; not in an open text, whose stream holds it until it is whole).
 */
function bearerValue(length: number, open: boolean) {
  return (m: RegExpExecArray): { start: number; end: number } | false => {
    const cutShort = !open && m.index + m[0].length === length && m[1].length >= BEARER_DETECT;
    if (!cutShort && shannonEntropy(m[1]) < 3.5) return false;
    const start = m.index + m[0].length - m[1].length;
    return { start, end: start + m[1].length };
  };
}

/**
 * `name = value` / `name: value` / `"name": "value"` where the name says key, secret, token or
 * password. The name is one identifier (no nested repetition); the value must be 12+ characters
 * with high entropy, which leaves out placeholders such as `your-api-key-here` or `${API_KEY}`.
 */
const ASSIGNMENT =
  /(?<![A-Za-z0-9_.-])([A-Za-z][A-Za-z0-9_.-]{0,48})["']?[ \t]{0,8}(?::=|=>|[:=])[ \t]{0,8}["'`]?([^\s"'`,;:=(){}[\]<>]{12,256}={0,2})/g;
const SECRET_NAME =
  /api[_.-]?key|apikey|secret|token|passw(?:or)?d|pwd|access[_.-]?key|private[_.-]?key|credential|auth[_.-]?key|authorization/i;
const TOKEN_NAME = /token|authorization/i;
const PASSWORD_NAME = /passw(?:or)?d|pwd|secret|credential/i;

const genericSecret: Detector = {
  id: 'generic_secret',
  trigger: { chars: ':=' },
  family: 'secrets',
  description: 'Assignment of a high-entropy value to a name such as api_key, secret, token or password.',
  // The span is the value: 256 characters and 2 `=` (a longer value is cut there by the pattern).
  maxSpanChars: 256 + 2,
  // The whole value: its entropy and mix of characters are judged on all of it.
  detectChars: 256 + 2,
  find: (view) => findAssignments(view.text),
  reference: (view) => searchAssignments(view.text),
  pendingFrom: tokenPending,
};

/** The same pattern, tried at one position (see assignmentStarts). */
const ASSIGNMENT_AT = new RegExp(ASSIGNMENT.source, 'y');

/** Assignments, the pattern tried only where one can start. */
function findAssignments(text: string): Finding[] {
  const out: Finding[] = [];
  let from = 0; // where the plain search would go on
  for (const start of assignmentStarts(text)) {
    if (start < from) continue;
    ASSIGNMENT_AT.lastIndex = start;
    const m = ASSIGNMENT_AT.exec(text);
    if (m !== null) from = judgeAssignment(m, out);
  }
  return out;
}

/** Assignments, the plain way: the pattern searched through the whole text. */
function searchAssignments(text: string): Finding[] {
  const out: Finding[] = [];
  ASSIGNMENT.lastIndex = 0;
  for (let m = ASSIGNMENT.exec(text); m !== null; m = ASSIGNMENT.exec(text)) {
    ASSIGNMENT.lastIndex = judgeAssignment(m, out);
  }
  return out;
}

/** Adds the match's value when it is a secret; returns where the search goes on. */
function judgeAssignment(m: RegExpExecArray, out: Finding[]): number {
  const [whole, name, value] = m;
  const start = m.index + whole.length - value.length;
  if (!SECRET_NAME.test(name) || !looksRandom(value)) return start; // the value may hold an assignment
  // A key format's near miss (its prefix, the wrong length or checksum) or a placeholder is no secret.
  if (failedFormat(value) || isPlaceholder(value)) return start + value.length;
  const label = PASSWORD_NAME.test(name) ? 'SECRET' : TOKEN_NAME.test(name) ? 'TOKEN' : 'API_KEY';
  out.push({ start, end: start + value.length, label, weight: 0.75 });
  return start + value.length;
}

const isNameChar = (c: number) =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 46 || c === 45;
const isLetter = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90);
const isBlank = (c: number) => c === 32 || c === 9;

/**
 * The positions where an assignment can start, ascending: every match has an operator (`:` or
 * `=`, found with indexOf; prose has few), and reading back from it over at most 8 blanks, an
 * optional quote and the name (a whole run of name characters, at most 49, starting with a
 * letter) gives the one position where a match using that operator can start.
 */
function assignmentStarts(text: string): number[] {
  const starts: number[] = [];
  let colon = text.indexOf(':');
  let equals = text.indexOf('=');
  while (colon !== -1 || equals !== -1) {
    let op: number;
    if (equals === -1 || (colon !== -1 && colon < equals)) {
      op = colon;
      colon = text.indexOf(':', colon + 1);
    } else {
      op = equals;
      equals = text.indexOf('=', equals + 1);
    }
    let i = op;
    while (i > 0 && op - i < 8 && isBlank(text.charCodeAt(i - 1))) i--;
    if (i > 0 && isBlank(text.charCodeAt(i - 1))) continue; // more than 8 blanks
    if (i > 0 && (text.charCodeAt(i - 1) === 34 || text.charCodeAt(i - 1) === 39)) i--; // " or '
    const nameEnd = i;
    while (i > 0 && nameEnd - i < 50 && isNameChar(text.charCodeAt(i - 1))) i--;
    if (i === nameEnd || nameEnd - i > 49 || (i > 0 && isNameChar(text.charCodeAt(i - 1)))) continue;
    if (isLetter(text.charCodeAt(i))) starts.push(i);
  }
  return starts;
}

/** Random-looking: varied characters (entropy ≥ 3 bits/char) mixing letters and digits or symbols. */
function looksRandom(value: string): boolean {
  if (shannonEntropy(value) < 3) return false;
  const kinds = Number(/[a-z]/.test(value)) + Number(/[A-Z]/.test(value)) + Number(/\d/.test(value));
  return kinds >= 2 && !/^[a-z]+(?:[-_.][a-z]+)*$/i.test(value);
}

export const secretDetectors: Detector[] = [
  ...keyDetectors,
  jwt,
  privateKey,
  bearerToken,
  genericSecret,
  ...credentialDetectors,
];
