/**
 * Secret detectors: credentials with a recognisable shape (provider key prefixes, JWTs, PEM
 * private keys) and generic `api_key = "..."` style assignments whose value looks random. Each
 * pattern starts only where a run of its characters starts (look-behind), so a long token is
 * scanned once. Ordinary text holds none of their prefixes: each search starts at the first
 * occurrence of a literal its matches contain (an anchor, found with indexOf) and skips the text
 * when there is none.
 */
import { shannonEntropy } from './checksums.ts';
import { type Anchor, type Detector, type Finding, findAll, firstAnchor, pushFinding } from './detector.ts';

/** A provider key: a fixed prefix and a bounded run of characters; `maxSpanChars` is the pattern's longest match. */
function prefixed(
  id: string,
  description: string,
  re: RegExp,
  label: string,
  anchors: Anchor[],
  maxSpanChars: number,
  weight = 0.95,
): Detector {
  return {
    id,
    family: 'secrets',
    description,
    maxSpanChars,
    find: (view) => findAll(view.text, re, label, weight, undefined, firstAnchor(view.text, anchors)),
    reference: (view) => findAll(view.text, re, label, weight),
  };
}

const awsAccessKey = prefixed(
  'aws_access_key',
  'AWS access key id: AKIA/ASIA/ABIA/ACCA and 16 upper-case letters or digits.',
  /(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])/g,
  'API_KEY',
  [
    ['AKIA', 0],
    ['ASIA', 0],
    ['ABIA', 0],
    ['ACCA', 0],
    ['A3T', 0],
  ],
  20,
);

const githubToken = prefixed(
  'github_token',
  'GitHub token: ghp_/gho_/ghu_/ghs_/ghr_ and 36+ characters, or github_pat_ fine-grained tokens.',
  /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])/g,
  'TOKEN',
  [['_', 6]],
  11 + 255, // github_pat_ and 255
);

const slackToken = prefixed(
  'slack_token',
  'Slack token (xoxb-, xoxp-, xoxa-, xoxs-, xoxr-, xoxo-) or incoming-webhook URL.',
  /(?<![A-Za-z0-9-])xox[abposr]-[A-Za-z0-9-]{10,250}|https:\/\/hooks\.slack\.com\/services\/T[A-Z0-9]{6,12}\/B[A-Z0-9]{6,12}\/[A-Za-z0-9]{16,40}/g,
  'TOKEN',
  [
    ['xox', 0],
    ['://', 5],
  ],
  5 + 250, // xoxb- and 250; a webhook URL is at most 101
);

const openaiApiKey = prefixed(
  'openai_api_key',
  'OpenAI-style secret key: sk- (optionally sk-proj-, sk-svcacct-, sk-admin-, sk-ant-) and 20+ characters.',
  /(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d{2}-)?[A-Za-z0-9_-]{20,300}(?![A-Za-z0-9_-])/g,
  'API_KEY',
  [['k-', 1]], // 'k' is rarer than 's' in prose: fewer false starts for indexOf
  3 + 12 + 300, // sk-, ant-admin01-, 300
);

const stripeKey = prefixed(
  'stripe_key',
  'Stripe secret or restricted key: sk_live_, sk_test_, rk_live_, rk_test_ and 16+ characters.',
  /(?<![A-Za-z0-9_])[rs]k_(?:live|test)_[A-Za-z0-9]{16,247}(?![A-Za-z0-9_])/g,
  'API_KEY',
  [['k_', 1]],
  8 + 247, // sk_live_ and 247
);

const googleApiKey = prefixed(
  'google_api_key',
  'Google API key: AIza and 35 characters.',
  /(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/g,
  'API_KEY',
  [['AIza', 0]],
  39,
);

// ---------------------------------------------------------------- JWT

const JWT = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;
/**
 * The longest JWT reported as one span. A JWT has no length limit; in an HTTP header it is held to
 * the server's header-line limit (8 KiB in nginx and Apache by default), and the usual ones are
 * far shorter than 4096 (a few hundred characters to 2-3 KB with many claims). A longer token is
 * reported in pieces.
 */
const JWT_MAX = 4096;

const jwt: Detector = {
  id: 'jwt',
  family: 'secrets',
  description: 'JSON Web Token: three base64url parts whose header decodes to JSON with an "alg".',
  maxSpanChars: JWT_MAX,
  find: (view) => findAll(view.text, JWT, 'TOKEN', 0.9, hasJwtHeader, firstAnchor(view.text, [['J', 2]]), JWT_MAX),
  reference: (view) => findAll(view.text, JWT, 'TOKEN', 0.9, hasJwtHeader, 0, JWT_MAX),
};

function hasJwtHeader(m: RegExpExecArray): boolean {
  try {
    const header = JSON.parse(Buffer.from(m[0].slice(0, m[0].indexOf('.')), 'base64url').toString('utf8'));
    return typeof header === 'object' && header !== null && typeof header.alg === 'string';
  } catch {
    return false;
  }
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

const privateKey: Detector = {
  id: 'private_key',
  family: 'secrets',
  description: 'PEM private key block (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP), up to its END line.',
  maxSpanChars: PEM_MAX,
  find: (view) => findPrivateKeys(view.text, view.text.indexOf('-----BEGIN ')),
  reference: (view) => findPrivateKeys(view.text, 0),
};

function findPrivateKeys(text: string, from: number): Finding[] {
  const out: Finding[] = [];
  if (from < 0) return out;
  // The first `-----END ` at or after the block's body, and the end of the END line there (-1:
  // not one), kept from block to block: blocks come in order, so the text after them is searched
  // once however many BEGIN lines lack an END (searching it again for each was quadratic).
  let endAt = -2; // -2: not searched yet; -1: none left
  let endLineEnd = -1;
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
  }
  return out;
}

// ---------------------------------------------------------------- bearer tokens and assignments

const BEARER = /(?<![A-Za-z0-9])Bearer[ \t]+([A-Za-z0-9._~+/-]{20,2048}=*)(?![A-Za-z0-9._~+/=-])/g;
/**
 * The span is the credential: 2048 token characters and base64 padding (2 `=`). RFC 6750 allows
 * any number of `=`: a value with more is reported in pieces.
 */
const BEARER_MAX = 2048 + 2;

const bearerToken: Detector = {
  id: 'bearer_token',
  family: 'secrets',
  description: 'HTTP bearer credential ("Bearer <20+ characters>") with a random-looking value.',
  maxSpanChars: BEARER_MAX,
  find: (view) =>
    findAll(view.text, BEARER, 'TOKEN', 0.8, bearerValue, firstAnchor(view.text, [['Bearer', 0]]), BEARER_MAX),
  reference: (view) => findAll(view.text, BEARER, 'TOKEN', 0.8, bearerValue, 0, BEARER_MAX),
};

function bearerValue(m: RegExpExecArray): { start: number; end: number } | false {
  if (shannonEntropy(m[1]) < 3.5) return false;
  const start = m.index + m[0].length - m[1].length;
  return { start, end: start + m[1].length };
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
  family: 'secrets',
  description: 'Assignment of a high-entropy value to a name such as api_key, secret, token or password.',
  // The span is the value: 256 characters and 2 `=` (a longer value is cut there by the pattern).
  maxSpanChars: 256 + 2,
  find: (view) => findAssignments(view.text),
  reference: (view) => searchAssignments(view.text),
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
  awsAccessKey,
  githubToken,
  slackToken,
  openaiApiKey,
  stripeKey,
  googleApiKey,
  jwt,
  privateKey,
  bearerToken,
  genericSecret,
];
