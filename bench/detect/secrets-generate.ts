/**
 * A seeded generator of labelled secrets for the `secrets` family: keys built from the vendors'
 * documented formats (the patterns of plugins/classify/patterns/key-formats.ts, checksums made
 * valid), credentials known by their context (connection strings, `curl -u`, Basic, vendor
 * keywords), each bare in prose and assigned in code or config; near misses of every format
 * (one character short or long, a character outside its alphabet, a wrong checksum, the prefix in
 * the wrong case); placeholders and documented example keys; and hard negatives (UUIDs, git SHAs,
 * hashes, base64 images, npm integrity strings, ordinary code and config without secrets).
 * Nothing is read from a public test corpus (gitleaks / secretlint / detect-secrets test data are
 * kept for the independent evaluation of issue 25).
 *
 *   npx tsx bench/detect/secrets-generate.ts [--seed 25] [--out .data/detect/secrets-eval.jsonl] [--sample bench/detect/secrets-sample.jsonl]
 *
 * Each item: `{id, text, kind, group, provider?, spans: [{start, end, type}]}`. `kind`:
 * `bare` / `assigned` (a secret; `group` is the detector id that should find it, the span is the
 * secret), `near_miss`, `placeholder`, `hard_negative` (no secret; `group` says which kind).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMPILED } from '../../plugins/classify/patterns/key-detectors.ts';

export interface Span {
  start: number;
  end: number;
  type: string;
}
export type Kind = 'bare' | 'assigned' | 'near_miss' | 'placeholder' | 'hard_negative';
export interface Item {
  id: string;
  text: string;
  kind: Kind;
  group: string;
  provider?: string;
  spans: Span[];
}

/** mulberry32: a small seeded generator, so that a seed gives the same set everywhere. */
export function rng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = (n: number) => Math.floor(next() * n);
  const one = <T>(xs: readonly T[]): T => xs[pick(xs.length)] as T;
  const chars = (alphabet: string, n: number) =>
    Array.from({ length: n }, () => alphabet[pick(alphabet.length)]).join('');
  return { next, pick, one, chars };
}
type Rng = ReturnType<typeof rng>;

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const HEX = '0123456789abcdef';

/** Prose around a bare key: no word that names a secret, no assignment. */
const BARE = [
  'Here it is: {k}',
  'I pasted {k} into the form and it worked.',
  'Can you check why {k} is rejected by the server?',
  '{k}',
  'The logs show {k} right before the crash.',
  'Use {k} when you run the deploy script.',
  'Copy this (`{k}`) into the settings page.',
  'Hi team, the new one is {k} - please rotate the old one.',
  'Está aquí: {k} para el entorno de pruebas.',
  '> {k}\n> sent from my phone',
  'It failed with {k}, then I restarted.',
  'Please store {k} somewhere safe.',
];

/** Code and config assigning a secret. */
const ASSIGNED = [
  'export API_KEY="{k}"',
  'GITHUB_TOKEN={k}',
  '{"token": "{k}", "region": "eu-west-1"}',
  'auth:\n  token: {k}\n  timeout: 30',
  "const apiKey = '{k}';",
  'client = Client(api_key="{k}")',
  'SECRET_KEY = "{k}"',
  'password: {k}',
  'headers["X-Api-Key"] = "{k}"',
  '[default]\naccess_token = {k}',
];

function embed(template: string, value: string, type: string) {
  const at = template.indexOf('{k}');
  const text = template.slice(0, at) + value + template.slice(at + 3);
  return { text, spans: [{ start: at, end: at + value.length, type }] };
}

/** A valid key of a format. */
export function keyOf(c: (typeof COMPILED)[number], r: Rng): string {
  for (;;) {
    const made = c.pattern.generate(r.pick);
    const key = c.format.fix ? c.format.fix(made) : made;
    // A loose shape's keys mix letters and digits (as the detector requires): a short random one
    // may lack digits now and then, which no real key of that kind does.
    if (!c.format.loose || (/\d/.test(key.slice(3)) && /[A-Za-z]/.test(key.slice(3)))) return key;
  }
}

/** Whether `value` is a whole key of the format (its pattern, boundaries, checksum). */
function isKey(c: (typeof COMPILED)[number], value: string): boolean {
  c.re.lastIndex = 0;
  const m = c.re.exec(value);
  return m !== null && m[0].length === value.length && (!c.format.check || c.format.check(value));
}

/** A near miss of a key: not one of its format's keys any more (null when none is found). */
function nearMiss(c: (typeof COMPILED)[number], key: string, r: Rng): { value: string; how: string } | null {
  const p = c.pattern.prefix.length;
  const ways: Array<[string, () => string]> = [
    ['short', () => key.slice(0, -1)],
    ['long', () => key + r.one([...'aZ7'])],
    [
      'charset',
      () => {
        const at = p + r.pick(key.length - p);
        const bad = [...'_-'].find((x) => !c.pattern.chars.has(x)) ?? '-';
        return key.slice(0, at) + bad + key.slice(at + 1);
      },
    ],
    ['prefix_case', () => (p > 0 ? swapCase(key.slice(0, p)) + key.slice(p) : key)],
  ];
  if (c.format.check) {
    ways.push([
      'checksum',
      () => {
        const at = p + r.pick(Math.max(1, key.length - p - 6));
        const x = key[at] as string;
        const swap = /[0-9]/.test(x) ? String((Number(x) + 1) % 10) : x === 'Q' ? 'P' : 'Q';
        return key.slice(0, at) + swap + key.slice(at + 1);
      },
    ]);
  }
  for (let tries = 0; tries < 6; tries++) {
    const [how, make] = r.one(ways);
    const value = make();
    if (value !== key && !COMPILED.some((other) => isKey(other, value))) return { value, how };
  }
  return null;
}

const swapCase = (s: string) => [...s].map((x) => (x === x.toLowerCase() ? x.toUpperCase() : x.toLowerCase())).join('');

/** A placeholder in a format's shape: its prefix, then a body no key has. */
function placeholderOf(c: (typeof COMPILED)[number], key: string, r: Rng): { value: string; how: string } {
  const p = c.pattern.prefix;
  const n = key.length - p.length;
  const body = (how: string): string => {
    switch (how) {
      case 'x':
        return 'X'.repeat(n);
      case 'zeros':
        return '0'.repeat(n);
      case 'sequential':
        return (ALNUM.toLowerCase().replace(/[A-Z]/g, '') + '0123456789'.repeat(30)).slice(0, n);
      case 'your_key':
        return `your_${p.replace(/[^a-z]/gi, '').toLowerCase() || 'api'}_key_here`;
      default:
        return `<${c.format.provider.toLowerCase().replace(/[^a-z]+/g, '-')}-token>`;
    }
  };
  const how = r.one(['x', 'zeros', 'sequential', 'your_key', 'angle']);
  return { value: p + body(how), how };
}

/** Example keys printed in documentation and templates, never valid. */
const DOCUMENTED_EXAMPLES = [
  'AKIAIOSFODNN7EXAMPLE',
  'AKIAXXXXXXXXXXXXXXXX',
  'xoxb-12345-abcd234',
  'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
  'pk_test_TYooMQauvdEDq54NiTphI7jx',
  'ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',
  'sk-...',
  'sk-proj-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX',
  '${GITHUB_TOKEN}',
  '<your-api-key>',
  'YOUR_API_KEY_HERE',
  '{{ secrets.NPM_TOKEN }}',
  'xoxp-your-token-here',
  'AIzaSyXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX',
  'glpat-xxxxxxxxxxxxxxxxxxxx',
  'postgres://user:password@localhost:5432/mydb',
  'mongodb+srv://<username>:<password>@cluster0.example.mongodb.net/',
  'redis://:${REDIS_PASSWORD}@redis:6379/0',
  'curl -u $USER:$TOKEN https://api.example.com',
  'curl -u username:password https://api.example.com',
  'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  'AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ',
  'npm_0000000000000000000000000000000000000',
  'dop_v1_0000000000000000000000000000000000000000000000000000000000000000',
];

/** Context credentials: a value only its context makes a secret. */
function contextSecrets(r: Rng): Array<{ group: string; provider: string; text: string; value: string }> {
  const pw = () => r.chars(ALNUM, 6 + r.pick(10)) + r.one(['!', '#', '%', '']) + r.chars('0123456789', 2);
  const host = r.one(['db.internal', 'prod-db.example.com', '10.0.3.7', 'cluster0.abcde.mongodb.net', 'localhost']);
  const user = r.one(['app', 'admin', 'svc_reports', 'deploy', 'postgres']);
  const b64 = (n: number) => r.chars(`${ALNUM}+/`, n);
  const out: Array<{ group: string; provider: string; text: string; value: string }> = [];
  const add = (group: string, provider: string, template: string, value: string) =>
    out.push({ group, provider, text: template.replace('{v}', value), value });
  let p = pw();
  add('postgres_connection_string', 'PostgreSQL', `DATABASE_URL=postgres://${user}:{v}@${host}:5432/app`, p);
  p = pw();
  add(
    'postgres_connection_string',
    'PostgreSQL',
    `connect with postgresql://${user}:{v}@${host}/reports?sslmode=require`,
    p,
  );
  p = pw();
  add('mongodb_connection_string', 'MongoDB', `MONGO_URI="mongodb+srv://${user}:{v}@${host}/test?retryWrites=true"`, p);
  p = pw();
  add('redis_connection_string', 'Redis', `REDIS_URL=redis://:{v}@${host}:6379/0`, p);
  p = pw();
  add('amqp_connection_string', 'RabbitMQ (AMQP)', `broker_url = "amqp://${user}:{v}@${host}:5672/vhost"`, p);
  p = pw();
  add('mysql_connection_string', 'MySQL / MariaDB', `mysql://${user}:{v}@${host}:3306/shop`, p);
  p = pw();
  add('url_credentials', 'any URL (http, https, …)', `git clone https://${user}:{v}@git.example.com/team/repo.git`, p);
  p = pw();
  add('curl_basic_auth', 'curl', `curl -u ${user}:{v} https://api.example.com/v1/items`, p);
  p = pw();
  add('curl_basic_auth', 'curl', `curl -s --user "${user}:{v}" -X POST https://api.example.com/hooks`, p);
  const basic = Buffer.from(`${user}:${pw()}`).toString('base64');
  add('basic_auth_credentials', 'HTTP Basic', 'Authorization: Basic {v}', basic);
  add('aws_secret_access_key', 'AWS', 'aws_secret_access_key = {v}', b64(40));
  add('aws_secret_access_key', 'AWS', 'AWS_SECRET_ACCESS_KEY="{v}"', b64(40));
  add(
    'azure_storage_account_key',
    'Azure Storage',
    'DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={v};EndpointSuffix=core.windows.net',
    `${b64(86)}==`,
  );
  add(
    'azure_shared_access_key',
    'Azure Service Bus / Event Hubs',
    'Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={v}',
    `${b64(43)}=`,
  );
  add(
    'gcp_service_account_key',
    'Google Cloud',
    '{\n  "type": "service_account",\n  "project_id": "acme-prod",\n  "private_key_id": "{v}",\n',
    r.chars(HEX, 40),
  );
  add('datadog_api_key', 'Datadog', 'DD_API_KEY={v}', r.chars(HEX, 32));
  add('twilio_auth_token', 'Twilio', 'TWILIO_AUTH_TOKEN={v}', r.chars(HEX, 32));
  add('heroku_legacy_api_key', 'Heroku', 'HEROKU_API_KEY={v}', uuid(r));
  add('keyword_secret', 'prose', 'my password for the staging server is {v}', pw());
  add('keyword_secret', 'prose', 'The API key - {v}', r.chars(ALNUM, 24) + r.chars('0123456789', 2));
  return out;
}

function uuid(r: Rng): string {
  const h = (n: number) => r.chars(HEX, n);
  return `${h(8)}-${h(4)}-4${h(3)}-${r.one([...'89ab'])}${h(3)}-${h(12)}`;
}

/** Text with no secret that looks like one. */
function hardNegatives(r: Rng): Array<{ group: string; text: string }> {
  const b64 = (n: number) => r.chars(`${ALNUM}+/`, n);
  return [
    { group: 'uuid', text: `Request ${uuid(r)} failed; retry with id ${uuid(r)}.` },
    { group: 'git_sha', text: `Fixed in commit ${r.chars(HEX, 40)} (see also ${r.chars(HEX, 7)}).` },
    { group: 'sha256', text: `sha256sum: ${r.chars(HEX, 64)}  release.tar.gz` },
    { group: 'md5', text: `md5 checksum ${r.chars(HEX, 32)} matches the mirror.` },
    { group: 'docker_digest', text: `image: ghcr.io/acme/api@sha256:${r.chars(HEX, 64)}` },
    {
      group: 'base64_image',
      text: `<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA${b64(300)}=" alt="logo">`,
    },
    { group: 'npm_integrity', text: `"integrity": "sha512-${b64(86)}=="` },
    {
      group: 'code',
      text: 'const token = await getToken(req.headers.authorization);\nif (!token) throw new Error("no token");',
    },
    { group: 'code', text: 'password = os.environ["DB_PASSWORD"]\napi_key = settings.API_KEY' },
    { group: 'code', text: 'auth:\n  token: ${AUTH_TOKEN}\n  secret_ref: prod-db-credentials' },
    {
      group: 'code',
      text: 'def rotate_secret(secret_id: str, version: int = 2) -> None:\n    client.rotate(secret_id)',
    },
    { group: 'code', text: `const id = "${r.chars(ALNUM, 21)}"; // nanoid` },
    { group: 'prose', text: 'The token limit is 4096 and the model is gpt-4o-2024-08-06; the key idea is caching.' },
    { group: 'prose', text: 'Your password must be at least 12 characters long and include a digit.' },
    { group: 'url', text: `See https://github.com/acme/api/blob/${r.chars(HEX, 40)}/src/index.ts#L42 for details.` },
    { group: 'url', text: 'ssh://git@github.com/acme/api.git and https://user@example.com/path' },
    { group: 'path', text: '/var/lib/docker/overlay2/3f2a9c7d1e5b8a0f6c4d2e9b7a1c3f5d/merged/etc/ssl/private' },
    { group: 'version', text: 'Upgraded from 1.4.2-beta.3+build.20240611 to 2.0.0-rc.1.' },
    {
      group: 'random_word',
      text: `Lorem ipsum ${r.chars('abcdefghijklmnopqrstuvwxyz', 12)} dolor sit amet, ${r.chars(ALNUM, 10)}.`,
    },
  ];
}

export function generateSecretsSet({ seed = 25, perFormat = 4 } = {}): Item[] {
  const r = rng(seed);
  const items: Item[] = [];
  let n = 0;
  const push = (kind: Kind, group: string, text: string, spans: Span[], provider?: string) =>
    items.push({ id: `s${seed}-${n++}`, text, kind, group, ...(provider ? { provider } : {}), spans });
  for (const c of COMPILED) {
    const { id, provider, label } = c.format;
    for (let k = 0; k < perFormat; k++) {
      const key = keyOf(c, r);
      const bare = embed(r.one(BARE), key, label);
      push('bare', id, bare.text, bare.spans, provider);
      const assigned = embed(r.one(ASSIGNED), keyOf(c, r), label);
      push('assigned', id, assigned.text, assigned.spans, provider);
      const miss = nearMiss(c, keyOf(c, r), r);
      if (miss) push('near_miss', `${id}:${miss.how}`, embed(r.one(BARE), miss.value, label).text, [], provider);
      if (k < 2) {
        const ph = placeholderOf(c, key, r);
        push('placeholder', `${id}:${ph.how}`, embed(r.one(k ? ASSIGNED : BARE), ph.value, label).text, [], provider);
      }
    }
  }
  for (let k = 0; k < perFormat; k++) {
    for (const s of contextSecrets(r)) {
      const at = s.text.indexOf(s.value);
      push('assigned', s.group, s.text, [{ start: at, end: at + s.value.length, type: 'SECRET' }], s.provider);
    }
    for (const h of hardNegatives(r)) push('hard_negative', h.group, h.text, []);
  }
  for (const example of DOCUMENTED_EXAMPLES) {
    push('placeholder', 'documented_example', embed(r.one(BARE), example, 'X').text, []);
    push('placeholder', 'documented_example', embed(r.one(ASSIGNED), example, 'X').text, []);
  }
  return items;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const seed = Number(arg('--seed') ?? 25);
  const items = generateSecretsSet({ seed });
  const out = arg('--out') ?? '.data/detect/secrets-eval.jsonl';
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${items.map((i) => JSON.stringify(i)).join('\n')}\n`);
  console.log(`${items.length} items -> ${out}`);
  const sample = arg('--sample');
  if (sample) {
    // Every format bare and assigned once, near misses and placeholders of every third format,
    // each kind of hard negative, each documented example.
    const seen = new Set<string>();
    const formats = COMPILED.map((c) => c.format.id);
    const subset = items.filter((i) => {
      const format = i.group.split(':')[0] as string;
      const n = formats.indexOf(format);
      if ((i.kind === 'near_miss' || i.kind === 'placeholder') && n >= 0 && n % 3 !== 0) return false;
      const key = i.group === 'documented_example' ? i.text : `${i.kind}:${format}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    writeFileSync(sample, `${subset.map((i) => JSON.stringify(i)).join('\n')}\n`);
    console.log(`${subset.length} items -> ${sample}`);
  }
}
