/**
 * Credentials known by their context rather than their shape: passwords in connection strings
 * and URLs (`postgres://user:pass@host`, `redis://:pass@host`), `curl -u user:pass`, HTTP Basic
 * credentials, values named by a vendor keyword (`AccountKey=…`, `aws_secret_access_key = …`,
 * `"private_key_id": "…"`, a Datadog key next to `datadog`), and random-looking values right after
 * a word such as password, token or API key in prose. Each is a named detector; every search is
 * anchored on a literal (`://`, `-u`, `Basic`, a keyword) and reads a bounded stretch after it.
 */
import { shannonEntropy } from './checksums.ts';
import { type Detector, type DetectorGroup, type Finding, type TextView, trailingRun } from './detector.ts';
import { failedFormat } from './key-detectors.ts';
import { isPlaceholder } from './placeholders.ts';

/** Lower case with the text's offsets: toLowerCase unless it changes the length (`İ`), else ASCII only. */
function lowerCase(view: TextView): string {
  const lower = view.text.toLowerCase();
  return lower.length === view.text.length ? lower : view.text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/** A number for the first three characters of a keyword or of the text at a place. */
const head3 = (s: string, at: number) => (s.charCodeAt(at) << 16) ^ (s.charCodeAt(at + 1) << 8) ^ s.charCodeAt(at + 2);

/**
 * Where each keyword of `keywords` occurs in the text, at the start of a word (or at a `"`): one
 * pass over the text, each word start looked up by its first three characters (searching the
 * text once per keyword stopped at every common first letter: tens of µs on 2 KB).
 */
function keywordIndex(keywords: readonly string[]): (view: TextView) => Map<string, number[]> {
  const byHead = new Map<number, string[]>();
  for (const k of new Set(keywords)) byHead.set(head3(k, 0), [...(byHead.get(head3(k, 0)) ?? []), k]);
  // The keywords' first three characters, found by the regex engine (native code); the word
  // boundary before them is checked here.
  const heads = new RegExp(
    [...new Set(keywords.map((k) => k.slice(0, 3).replace(/[^a-z0-9]/g, (c) => `\\${c}`)))].join('|'),
    'gi',
  );
  return (view) => {
    const text = view.text;
    const out = new Map<string, number[]>();
    let lower: string | undefined;
    heads.lastIndex = 0;
    for (let m = heads.exec(text); m !== null; m = heads.exec(text)) {
      const i = m.index;
      heads.lastIndex = i + 1; // keywords may overlap (`api key`, `key`)
      if (text.charCodeAt(i) !== 34 && i > 0 && isAlnum(text.charCodeAt(i - 1))) continue;
      lower ??= view.derived(lowerCase);
      for (const k of byHead.get(head3(lower, i)) ?? []) {
        if (!lower.startsWith(k, i)) continue;
        const list = out.get(k) ?? [];
        list.push(i);
        out.set(k, list);
      }
    }
    return out;
  };
}

/** Stand-in passwords of examples and templates: `password`, `pass`, `changeme`, `****`, `<pass>`, `${PASS}`, `$PASS`, `%s`. */
const STAND_IN_PASSWORDS = new Set([
  'password',
  'passwd',
  'pass',
  'pwd',
  'pw',
  'secret',
  'changeme',
  'mypassword',
  'yourpassword',
  'your_password',
  'user',
  'username',
  'admin',
  'root',
  'guest',
  'test',
  'example',
  'dbpass',
  'db_password',
  'pa55word',
  'p@ssw0rd',
  'p@ssword',
]);

const sameChar = (s: string) => {
  for (let i = 1; i < s.length; i++) if (s.charCodeAt(i) !== s.charCodeAt(0)) return false;
  return true;
};

/** Whether a password (from a URL, curl -u, Basic credentials) is a stand-in rather than a secret. */
export function isPasswordPlaceholder(password: string, user = ''): boolean {
  if (password.length === 0 || password === user) return true;
  if (password.length <= 13 && STAND_IN_PASSWORDS.has(password.toLowerCase())) return true;
  if (/^[<{$%[(*]/.test(password) || /^\.+$|^x+$/i.test(password)) return true; // <pass>, {pw}, ${PW}, $PW, %s, ..., xxx
  if (password.length >= 4 && sameChar(password)) return true; // aaaa
  return isPlaceholder(password) && password.length >= 8;
}

// ---------------------------------------------------------------- connection strings and URLs

interface UrlKind {
  id: string;
  provider: string;
  schemes: readonly string[];
}

/** Which detector a URL's scheme belongs to; any other scheme is `url_credentials`. */
const URL_KINDS: readonly UrlKind[] = [
  { id: 'postgres_connection_string', provider: 'PostgreSQL', schemes: ['postgres', 'postgresql'] },
  { id: 'mysql_connection_string', provider: 'MySQL / MariaDB', schemes: ['mysql', 'mysqlx', 'mariadb'] },
  { id: 'mongodb_connection_string', provider: 'MongoDB', schemes: ['mongodb', 'mongodb+srv'] },
  { id: 'redis_connection_string', provider: 'Redis', schemes: ['redis', 'rediss'] },
  { id: 'amqp_connection_string', provider: 'RabbitMQ (AMQP)', schemes: ['amqp', 'amqps'] },
  { id: 'sqlserver_connection_string', provider: 'SQL Server', schemes: ['mssql', 'sqlserver'] },
  { id: 'ftp_credentials', provider: 'FTP / SFTP', schemes: ['ftp', 'ftps', 'sftp'] },
  { id: 'smtp_credentials', provider: 'SMTP', schemes: ['smtp', 'smtps'] },
  { id: 'ldap_credentials', provider: 'LDAP', schemes: ['ldap', 'ldaps'] },
  { id: 'url_credentials', provider: 'any URL (http, https, …)', schemes: [] },
];
const SCHEME_KIND = new Map(URL_KINDS.flatMap((k) => k.schemes.map((s) => [s, k.id] as const)));

/** After `://`: the user (maybe empty), `:`, the password, `@` and the host's first character. */
const USERINFO = /([^\s:/?#@"'`<>]{0,64}):([^\s/?@"'`<>]{1,128})@[A-Za-z0-9[]/y;
const isSchemeChar = (c: number) => isAlnum(c) || c === 43 || c === 46 || c === 45; // + . -

/** Passwords in URLs, by detector id. */
function scanUrls(view: TextView): Map<string, Finding[]> {
  const text = view.text;
  const out = new Map<string, Finding[]>();
  for (let at = text.indexOf('://'); at !== -1; at = text.indexOf('://', at + 3)) {
    let s = at;
    while (s > 0 && at - s < 20 && isSchemeChar(text.charCodeAt(s - 1))) s--;
    if (s === at || (s > 0 && isSchemeChar(text.charCodeAt(s - 1)))) continue;
    const scheme = text.slice(s, at).toLowerCase();
    USERINFO.lastIndex = at + 3;
    const m = USERINFO.exec(text);
    if (m === null) continue;
    const user = m[1] as string; // indexed, not destructured: no iterator per match
    const password = m[2] as string;
    if (isPasswordPlaceholder(decodeURIComponentSafe(password), decodeURIComponentSafe(user))) continue;
    const id = SCHEME_KIND.get(scheme) ?? 'url_credentials';
    const start = at + 3 + user.length + 1;
    const list = out.get(id) ?? [];
    list.push({ start, end: start + password.length, label: 'SECRET', weight: 0.9 });
    out.set(id, list);
  }
  return out;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The URL kinds share one scan, and (as every credential here) the trailing token as release point. */
const URL_GROUP: DetectorGroup = {
  found: (view) => view.derived(scanUrls).size > 0,
  pending: () => (view) => view.derived(trailingToken),
};

const urlDetectors: Detector[] = URL_KINDS.map((k) => ({
  group: URL_GROUP,
  id: k.id,
  trigger: { chars: ':' }, // `://`
  family: 'secrets',
  description: `Password in a ${k.provider} URL: scheme://user:password@host (the span is the password).`,
  // The span is the password: at most 128 characters, seen whole with the `@` after it.
  maxSpanChars: 128,
  detectChars: 128,
  find: (view) => view.derived(scanUrls).get(k.id) ?? [],
}));

// ---------------------------------------------------------------- curl -u and Basic credentials

/**
 * `curl`, then on the same line within 300 characters `-u user:pass`, `--user user:pass` or
 * `--user=user:pass`, quoted or not. One regex (a bounded lazy gap, no lookaround): searching for
 * every `-u` and then back for its `curl` measured super-linear under the test runner on a text
 * dense with such commands.
 */
const CURL_USER = /curl[^\n]{0,300}?[ \t](?:-u|--user)(?:[ \t]{1,4}|=)["']?([^\s"':]{1,64}):([^\s"']{1,128})/g;

function findCurlUsers(text: string): Finding[] {
  const out: Finding[] = [];
  const first = text.indexOf('curl');
  if (first < 0) return out;
  CURL_USER.lastIndex = first;
  for (let m = CURL_USER.exec(text); m !== null; m = CURL_USER.exec(text)) {
    if (m.index > 0 && isAlnum(text.charCodeAt(m.index - 1))) continue; // `libcurl`, `xcurl`
    const password = m[2] as string;
    if (isPasswordPlaceholder(password, m[1] as string)) continue;
    const end = m.index + m[0].length;
    out.push({ start: end - password.length, end, label: 'SECRET', weight: 0.9 });
  }
  return out;
}

const curlUser: Detector = {
  id: 'curl_basic_auth',
  trigger: { chars: ':' }, // `user:password`
  family: 'secrets',
  description: 'Password given to curl: `curl -u user:password`, `--user user:password` (the span is the password).',
  maxSpanChars: 128,
  detectChars: 128,
  find: (view) => findCurlUsers(view.text),
};

const BASIC = /Basic[ \t]{1,4}([A-Za-z0-9+/]{8,256}={0,2})/y;

function findBasic(text: string): Finding[] {
  const out: Finding[] = [];
  for (let at = text.indexOf('Basic'); at !== -1; at = text.indexOf('Basic', at + 5)) {
    if (at > 0 && isAlnum(text.charCodeAt(at - 1))) continue;
    BASIC.lastIndex = at;
    const m = BASIC.exec(text);
    if (m === null) continue;
    const end = at + m[0].length;
    if (end < text.length && (isAlnum(text.charCodeAt(end)) || text.charCodeAt(end) === 61)) continue;
    const decoded = Buffer.from(m[1] as string, 'base64').toString('latin1');
    const colon = decoded.indexOf(':');
    if (colon < 1 || !/^[\x20-\x7e]+$/.test(decoded)) continue;
    if (isPasswordPlaceholder(decoded.slice(colon + 1), decoded.slice(0, colon))) continue;
    out.push({ start: end - (m[1] as string).length, end, label: 'SECRET', weight: 0.9 });
  }
  return out;
}

const basicAuth: Detector = {
  id: 'basic_auth_credentials',
  trigger: { words: ['Basic'] },
  family: 'secrets',
  description: 'HTTP Basic credentials: `Basic <base64 of user:password>` (the span is the base64).',
  maxSpanChars: 258,
  detectChars: 258,
  find: (view) => findBasic(view.text),
};

// ---------------------------------------------------------------- values named by a keyword

interface ContextFormat {
  id: string;
  provider: string;
  what: string;
  label: 'API_KEY' | 'TOKEN' | 'SECRET';
  /** Lower-case literals, one of which comes before the value (not inside a word). */
  keywords: readonly string[];
  /** The value, whole (anchored). */
  value: RegExp;
  /** Characters a value is made of: a value is a maximal run of them. */
  chars: RegExp;
  /** How far after the keyword's end the value may start (same line). */
  within: number;
  /** A value of the longest form (tests, docs): `maxSpanChars` is its length. */
  example: string;
  docs: string;
}

/** `n` pseudo-random characters of `alphabet` (deterministic): the rows' examples. */
function pseudo(alphabet: string, n: number, seed: number): string {
  let x = seed;
  let out = '';
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out += alphabet[(x >>> 16) % alphabet.length];
  }
  return out;
}
const A62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const H16 = '0123456789abcdef';
const uuidOf = (seed: number) => {
  const h = pseudo(H16, 32, seed);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const HEX32 = /^[0-9a-f]{32}$/;

/** Vendor keys without a distinctive shape: found next to the vendor's name or the key's name. */
export const CONTEXT_FORMATS: readonly ContextFormat[] = [
  {
    id: 'aws_secret_access_key',
    provider: 'AWS',
    what: 'secret access key',
    label: 'SECRET',
    keywords: [
      'aws_secret_access_key',
      'aws_secret_key',
      'secretaccesskey',
      'secret_access_key',
      'aws secret access key',
      'aws secret key',
      'aws_secret',
    ],
    value: /^[A-Za-z0-9/+]{40}$/,
    chars: /[A-Za-z0-9/+=]/,
    within: 40,
    example: pseudo(`${A62}/+`, 40, 1),
    docs: 'https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html',
  },
  {
    id: 'azure_storage_account_key',
    provider: 'Azure Storage',
    what: 'account key',
    label: 'SECRET',
    keywords: ['accountkey=', 'account_key', 'azure_storage_key', 'storage_account_key'],
    value: /^[A-Za-z0-9+/]{86}==$/,
    chars: /[A-Za-z0-9+/=]/,
    within: 24,
    example: `${pseudo(`${A62}+/`, 86, 2)}==`,
    docs: 'https://learn.microsoft.com/azure/storage/common/storage-configure-connection-string',
  },
  {
    id: 'azure_shared_access_key',
    provider: 'Azure Service Bus / Event Hubs',
    what: 'shared access key',
    label: 'SECRET',
    keywords: ['sharedaccesskey='],
    value: /^[A-Za-z0-9+/]{43}=$/,
    chars: /[A-Za-z0-9+/=]/,
    within: 4,
    example: `${pseudo(`${A62}+/`, 43, 3)}=`,
    docs: 'https://learn.microsoft.com/azure/service-bus-messaging/service-bus-sas',
  },
  {
    id: 'gcp_service_account_key',
    provider: 'Google Cloud',
    what: 'service account key (private_key_id of the JSON key file)',
    label: 'SECRET',
    keywords: ['"private_key_id"'],
    value: /^[0-9a-f]{40}$/,
    chars: /[0-9a-f]/,
    within: 12,
    example: pseudo(H16, 40, 4),
    docs: 'https://cloud.google.com/iam/docs/keys-create-delete',
  },
  {
    id: 'datadog_api_key',
    provider: 'Datadog',
    what: 'API or application key',
    label: 'API_KEY',
    keywords: ['datadog', 'dd_api_key', 'dd_app_key', 'dd-api-key', 'dd-application-key', 'dd_application_key'],
    value: /^(?:[0-9a-f]{32}|[0-9a-f]{40})$/,
    chars: /[0-9a-f]/,
    within: 40,
    example: pseudo(H16, 40, 5),
    docs: 'https://docs.datadoghq.com/account_management/api-app-keys/',
  },
  {
    id: 'twilio_auth_token',
    provider: 'Twilio',
    what: 'auth token',
    label: 'TOKEN',
    keywords: ['twilio'],
    value: HEX32,
    chars: /[0-9a-f]/,
    within: 40,
    example: pseudo(H16, 32, 6),
    docs: 'https://www.twilio.com/docs/iam/access-tokens',
  },
  {
    id: 'heroku_legacy_api_key',
    provider: 'Heroku',
    what: 'API key (UUID form)',
    label: 'API_KEY',
    keywords: ['heroku'],
    value: UUID,
    chars: /[0-9a-fA-F-]/,
    within: 40,
    example: uuidOf(7),
    docs: 'https://devcenter.heroku.com/articles/authentication',
  },
  {
    id: 'okta_api_token',
    provider: 'Okta',
    what: 'API token',
    label: 'TOKEN',
    keywords: ['okta', 'sswS'.toLowerCase()],
    value: /^00[A-Za-z0-9_-]{40}$/,
    chars: /[A-Za-z0-9_-]/,
    within: 40,
    example: `00${pseudo(`${A62}_-`, 40, 8)}`,
    docs: 'https://developer.okta.com/docs/guides/create-an-api-token/',
  },
  {
    id: 'algolia_admin_key',
    provider: 'Algolia',
    what: 'admin API key',
    label: 'API_KEY',
    keywords: ['algolia'],
    value: HEX32,
    chars: /[0-9a-f]/,
    within: 40,
    example: pseudo(H16, 32, 9),
    docs: 'https://www.algolia.com/doc/guides/security/api-keys/',
  },
  {
    id: 'cloudflare_api_token',
    provider: 'Cloudflare',
    what: 'API token or global API key',
    label: 'TOKEN',
    keywords: ['cloudflare', 'cf_api_token', 'cf_api_key', 'cf-api-token'],
    value: /^(?:[A-Za-z0-9_-]{40}|[0-9a-f]{37})$/,
    chars: /[A-Za-z0-9_-]/,
    within: 40,
    example: pseudo(`${A62}_-`, 40, 10),
    docs: 'https://developers.cloudflare.com/fundamentals/api/get-started/create-token/',
  },
  {
    id: 'mistral_api_key',
    provider: 'Mistral AI',
    what: 'API key',
    label: 'API_KEY',
    keywords: ['mistral'],
    value: /^[A-Za-z0-9]{32}$/,
    chars: /[A-Za-z0-9]/,
    within: 40,
    example: pseudo(A62, 32, 11),
    docs: 'https://docs.mistral.ai/getting-started/quickstart/',
  },
  {
    id: 'cohere_api_key',
    provider: 'Cohere',
    what: 'API key',
    label: 'API_KEY',
    keywords: ['cohere', 'co_api_key'],
    value: /^[A-Za-z0-9]{40}$/,
    chars: /[A-Za-z0-9]/,
    within: 40,
    example: pseudo(A62, 40, 12),
    docs: 'https://docs.cohere.com/reference/about',
  },
  {
    id: 'azure_cognitive_services_key',
    provider: 'Azure AI services (Azure OpenAI)',
    what: 'subscription key',
    label: 'API_KEY',
    keywords: ['ocp-apim-subscription-key', 'azure_openai_api_key', 'azure_openai_key', 'azure_api_key', 'api-key:'],
    value: /^[0-9a-f]{32}$|^[A-Za-z0-9]{84}$/,
    chars: /[A-Za-z0-9]/,
    within: 24,
    example: pseudo(A62, 84, 13),
    docs: 'https://learn.microsoft.com/azure/ai-services/authentication',
  },
  {
    id: 'fastly_api_token',
    provider: 'Fastly',
    what: 'API token',
    label: 'TOKEN',
    keywords: ['fastly'],
    value: /^[A-Za-z0-9_-]{32}$/,
    chars: /[A-Za-z0-9_-]/,
    within: 40,
    example: pseudo(`${A62}_-`, 32, 14),
    docs: 'https://docs.fastly.com/en/guides/using-api-tokens',
  },
  {
    id: 'snyk_token',
    provider: 'Snyk',
    what: 'API token',
    label: 'TOKEN',
    keywords: ['snyk'],
    value: UUID,
    chars: /[0-9a-fA-F-]/,
    within: 40,
    example: uuidOf(15),
    docs: 'https://docs.snyk.io/snyk-api/authentication-for-api',
  },
];

/** Every context format's values, by id: for each keyword occurrence, the first run of value characters after it (same line, `within`) that is a value. */
function scanContext(view: TextView): Map<string, Finding[]> {
  const text = view.text;
  const hits = view.derived(keywordsOf);
  const out = new Map<string, Finding[]>();
  for (const f of CONTEXT_FORMATS) {
    let last = -1; // the end of the last value found: one value per keyword run
    for (const keyword of f.keywords) {
      for (const at of hits.get(keyword) ?? []) {
        const value = valueAfter(text, at + keyword.length, f);
        if (value === null || value.start < last) continue;
        last = value.end;
        const list = out.get(f.id) ?? [];
        list.push({ start: value.start, end: value.end, label: f.label, weight: 0.9 });
        out.set(f.id, list);
      }
    }
  }
  for (const list of out.values()) list.sort((a, b) => a.start - b.start);
  return out;
}

function valueAfter(text: string, from: number, f: ContextFormat): { start: number; end: number } | null {
  const limit = Math.min(text.length, from + f.within);
  let i = from;
  while (i < limit) {
    const c = text[i] as string;
    if (c === '\n') return null;
    if (!f.chars.test(c) || (i > 0 && f.chars.test(text[i - 1] as string) && i !== from)) {
      i++;
      continue;
    }
    let end = i + 1;
    while (end < text.length && end - i <= 130 && f.chars.test(text[end] as string)) end++;
    const value = text.slice(i, end);
    if (f.value.test(value) && (i === 0 || !isAlnum(text.charCodeAt(i - 1))) && !isPlaceholder(value)) {
      return { start: i, end };
    }
    i = end;
  }
  return null;
}

const CONTEXT_GROUP: DetectorGroup = {
  found: (view) => view.derived(scanContext).size > 0,
  pending: () => (view) => view.derived(trailingToken),
};

const contextDetectors: Detector[] = CONTEXT_FORMATS.map((f) => ({
  group: CONTEXT_GROUP,
  id: f.id,
  // Every value is a run of 32+ characters that are not blanks.
  trigger: { run: 32 },
  family: 'secrets',
  description: `${f.provider} ${f.what}, next to one of: ${f.keywords.join(', ')} (${f.docs}).`,
  // The span is the value, seen whole (its length and alphabet decide).
  maxSpanChars: f.example.length,
  detectChars: f.example.length,
  find: (view: TextView) => view.derived(scanContext).get(f.id) ?? [],
}));

// ---------------------------------------------------------------- a random value after a secret word in prose

/**
 * `my password is Xy7!pQ2#mN9`, `API key - 9f8e7d…`, `token for staging: …`: a word naming a
 * secret, then within 48 characters on the line (a few words, maybe `is`, `:`, `=`), a value that
 * looks random. The value is the first token there that does.
 */
const SECRET_WORDS = [
  'password',
  'passwd',
  'passphrase',
  'pwd',
  'secret',
  'token',
  'api key',
  'apikey',
  'api_key',
  'access key',
  'auth key',
  'credential',
  'private key',
  'key',
];
/** Where the context formats' keywords and the words naming a secret occur: one pass for both. */
const keywordsOf = keywordIndex([...CONTEXT_FORMATS.flatMap((f) => f.keywords), ...SECRET_WORDS]);
const PROSE_VALUE = /[A-Za-z0-9+/=_.~!@#$%^&*-]/;

function findProseSecrets(view: TextView): Finding[] {
  const text = view.text;
  const hits = view.derived(keywordsOf);
  const found: Finding[] = [];
  for (const word of SECRET_WORDS) {
    for (const at of hits.get(word) ?? []) {
      // A word of its own: not inside an identifier or a key (`GITHUB_TOKEN=`, `AGE-SECRET-KEY-1…`,
      // `key-…` are the assignment's and the key formats' business).
      if (at > 0 && (isAlnum(text.charCodeAt(at - 1)) || /[-_.]/.test(text[at - 1] as string))) continue;
      const password = /pass|pwd/.test(word);
      let i = at + word.length;
      const limit = Math.min(text.length, i + 48);
      while (i < limit && isAlnum(text.charCodeAt(i))) i++; // passwords, tokens…
      if (i < text.length && !/[\s:="'`)]/.test(text[i] as string)) continue; // `password@host`, `key-value`
      while (i < limit) {
        const c = text[i] as string;
        if (c === '\n') break;
        if (!PROSE_VALUE.test(c) || c === '=' || c === ':') {
          i++;
          continue;
        }
        let end = i + 1;
        while (end < text.length && end - i < 258 && PROSE_VALUE.test(text[end] as string)) end++;
        let value = text.slice(i, end);
        const trail = /[.,!]+$/.exec(value)?.[0].length ?? 0; // sentence punctuation
        value = value.slice(0, value.length - trail);
        if (proseSecret(value, password, word.endsWith('key') && !word.includes('api'))) {
          found.push({ start: i, end: i + value.length, label: password ? 'SECRET' : 'API_KEY', weight: 0.75 });
          break;
        }
        i = end;
      }
    }
  }
  found.sort((a, b) => a.start - b.start || b.end - a.end);
  return found.filter((f, k) => k === 0 || f.start >= (found[k - 1] as Finding).end);
}

/**
 * Random-looking enough to be a secret named by the word before it. After a bare `key` (a row's
 * key, a cache key), hex and UUIDs are ids, not secrets.
 */
function proseSecret(value: string, password: boolean, bareKey: boolean): boolean {
  if (value.length < (password ? 8 : 16) || value.length > 256) return false;
  if (
    /^[a-z]+(?:[-_.][a-z]+)*$/i.test(value) ||
    /^\d+$/.test(value) ||
    /^[./~]|:\/\/|\.(?:com|org|io|net)\b/.test(value)
  )
    return false;
  if (isPlaceholder(value) || isPasswordPlaceholder(value) || failedFormat(value)) return false;
  const kinds =
    Number(/[a-z]/.test(value)) +
    Number(/[A-Z]/.test(value)) +
    Number(/\d/.test(value)) +
    Number(/[^A-Za-z0-9]/.test(value));
  if (password) return kinds >= 3 && shannonEntropy(value) >= 2.8;
  if (UUID.test(value) || /^[0-9a-f]+$/i.test(value))
    return !bareKey && value.length >= 32 && shannonEntropy(value) >= 3.3;
  return kinds >= 2 && /\d/.test(value) && /[A-Za-z]/.test(value) && shannonEntropy(value) >= 3.5;
}

const proseSecret_: Detector = {
  id: 'keyword_secret',
  // A password (8+ characters) is named by a word with `pass` or `pwd`; any other value is 16+.
  trigger: { words: ['pass', 'pwd'], run: 16 },
  family: 'secrets',
  description:
    'A random-looking value after a word naming a secret in prose ("my password is …", "API key: …"): passwords 8+ characters of 3 kinds, keys and tokens 16+ mixing letters and digits.',
  maxSpanChars: 256,
  detectChars: 256,
  find: findProseSecrets,
};

// ---------------------------------------------------------------- streams

/** Blanks: what no credential's span holds (a value, a password, a base64 run has none). */
const notBlank = (c: number) =>
  c > 32 &&
  c !== 0x85 &&
  c !== 0xa0 &&
  c !== 0x1680 &&
  !(c >= 0x2000 && c <= 0x200a) &&
  c !== 0x2028 &&
  c !== 0x2029 &&
  c !== 0x202f &&
  c !== 0x205f &&
  c !== 0x3000 &&
  c !== 0xfeff;
/**
 * How far back a credential's span can still change: the longest value (258) and what names it on
 * its token (`"password":"`, `scheme://user:`), with room. A span that starts further back is
 * final (its value is bounded and was followed by its end).
 */
const REACH = 600;
const trailingToken = (view: TextView) => trailingRun(view.text, notBlank, notBlank, REACH);

/**
 * For streams (Detector.pendingFrom): every credential found by its context is a run of non-blank
 * characters named by what comes before it (a keyword, `curl -u`, `Basic`, a URL's scheme), so
 * later text can only complete or change the trailing run: that run is pending, and an open text's
 * findings in it are held rather than reported.
 */
function streamable(d: Detector): Detector {
  const held = (view: TextView, found: Finding[]) => {
    if (!view.open) return found;
    const from = view.derived(trailingToken);
    return found.filter((f) => f.end < from);
  };
  return {
    ...d,
    find: (view) => held(view, d.find(view)),
    ...(d.reference ? { reference: (view: TextView) => held(view, (d.reference as Detector['find'])(view)) } : {}),
    pendingFrom: (view) => view.derived(trailingToken),
  };
}

export const credentialDetectors: Detector[] = [
  ...urlDetectors,
  curlUser,
  basicAuth,
  ...contextDetectors,
  proseSecret_,
].map(streamable);
