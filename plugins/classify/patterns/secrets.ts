/**
 * Secret detectors: credentials with a recognisable shape (provider key prefixes, JWTs, PEM
 * private keys) and generic `api_key = "..."` style assignments whose value looks random. Each
 * pattern starts only where a run of its characters starts (look-behind), so a long token is
 * scanned once.
 */
import { shannonEntropy } from './checksums.ts';
import { type Detector, type Finding, findAll } from './detector.ts';

function prefixed(id: string, description: string, re: RegExp, label: string, weight = 0.95): Detector {
  return { id, family: 'secrets', description, find: (view) => findAll(view.text, re, label, weight) };
}

const awsAccessKey = prefixed(
  'aws_access_key',
  'AWS access key id: AKIA/ASIA/ABIA/ACCA and 16 upper-case letters or digits.',
  /(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])/g,
  'API_KEY',
);

const githubToken = prefixed(
  'github_token',
  'GitHub token: ghp_/gho_/ghu_/ghs_/ghr_ and 36+ characters, or github_pat_ fine-grained tokens.',
  /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])/g,
  'TOKEN',
);

const slackToken = prefixed(
  'slack_token',
  'Slack token (xoxb-, xoxp-, xoxa-, xoxs-, xoxr-, xoxo-) or incoming-webhook URL.',
  /(?<![A-Za-z0-9-])xox[abposr]-[A-Za-z0-9-]{10,250}|https:\/\/hooks\.slack\.com\/services\/T[A-Z0-9]{6,12}\/B[A-Z0-9]{6,12}\/[A-Za-z0-9]{16,40}/g,
  'TOKEN',
);

const openaiApiKey = prefixed(
  'openai_api_key',
  'OpenAI-style secret key: sk- (optionally sk-proj-, sk-svcacct-, sk-admin-, sk-ant-) and 20+ characters.',
  /(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d{2}-)?[A-Za-z0-9_-]{20,300}(?![A-Za-z0-9_-])/g,
  'API_KEY',
);

const stripeKey = prefixed(
  'stripe_key',
  'Stripe secret or restricted key: sk_live_, sk_test_, rk_live_, rk_test_ and 16+ characters.',
  /(?<![A-Za-z0-9_])[rs]k_(?:live|test)_[A-Za-z0-9]{16,247}(?![A-Za-z0-9_])/g,
  'API_KEY',
);

const googleApiKey = prefixed(
  'google_api_key',
  'Google API key: AIza and 35 characters.',
  /(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/g,
  'API_KEY',
);

// ---------------------------------------------------------------- JWT

const JWT = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;

const jwt: Detector = {
  id: 'jwt',
  family: 'secrets',
  description: 'JSON Web Token: three base64url parts whose header decodes to JSON with an "alg".',
  find: (view) =>
    findAll(view.text, JWT, 'TOKEN', 0.9, (m) => {
      try {
        const header = JSON.parse(Buffer.from(m[0].slice(0, m[0].indexOf('.')), 'base64url').toString('utf8'));
        return typeof header === 'object' && header !== null && typeof header.alg === 'string';
      } catch {
        return false;
      }
    }),
};

// ---------------------------------------------------------------- PEM private keys

const PEM_BEGIN = /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/g;
const PEM_END = /-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/y;
/** The body of a block cut short: the lines of base64 that follow. */
const PEM_BODY = /[\r\n]*(?:[A-Za-z0-9+/=]+\r?\n)*[A-Za-z0-9+/=]*/y;

const privateKey: Detector = {
  id: 'private_key',
  family: 'secrets',
  description: 'PEM private key block (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP), up to its END line.',
  find(view) {
    const text = view.text;
    const out: Finding[] = [];
    PEM_BEGIN.lastIndex = 0;
    for (let m = PEM_BEGIN.exec(text); m !== null; m = PEM_BEGIN.exec(text)) {
      const bodyStart = m.index + m[0].length;
      const endAt = text.indexOf('-----END ', bodyStart);
      let end: number;
      PEM_END.lastIndex = endAt;
      const endLine = endAt >= 0 ? PEM_END.exec(text) : null;
      if (endLine) end = endAt + endLine[0].length;
      else {
        // No END line (truncated paste): mask the body that follows.
        PEM_BODY.lastIndex = bodyStart;
        end = bodyStart + (PEM_BODY.exec(text)?.[0].length ?? 0);
      }
      out.push({ start: m.index, end, label: 'PRIVATE_KEY', weight: 1 });
      PEM_BEGIN.lastIndex = end;
    }
    return out;
  },
};

// ---------------------------------------------------------------- bearer tokens and assignments

const BEARER = /(?<![A-Za-z0-9])Bearer[ \t]+([A-Za-z0-9._~+/-]{20,2048}=*)(?![A-Za-z0-9._~+/=-])/g;

const bearerToken: Detector = {
  id: 'bearer_token',
  family: 'secrets',
  description: 'HTTP bearer credential ("Bearer <20+ characters>") with a random-looking value.',
  find: (view) =>
    findAll(view.text, BEARER, 'TOKEN', 0.8, (m) => {
      if (shannonEntropy(m[1]) < 3.5) return false;
      const start = m.index + m[0].length - m[1].length;
      return { start, end: start + m[1].length };
    }),
};

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
  find: (view) => {
    const out: Finding[] = [];
    ASSIGNMENT.lastIndex = 0;
    for (let m = ASSIGNMENT.exec(view.text); m !== null; m = ASSIGNMENT.exec(view.text)) {
      const [whole, name, value] = m;
      if (!SECRET_NAME.test(name) || !looksRandom(value)) {
        ASSIGNMENT.lastIndex = m.index + whole.length - value.length; // the value may hold an assignment
        continue;
      }
      const label = PASSWORD_NAME.test(name) ? 'SECRET' : TOKEN_NAME.test(name) ? 'TOKEN' : 'API_KEY';
      const start = m.index + whole.length - value.length;
      out.push({ start, end: start + value.length, label, weight: 0.75 });
    }
    return out;
  },
};

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
