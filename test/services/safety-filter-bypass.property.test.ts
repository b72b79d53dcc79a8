/**
 * No silent bypass, egress side: the real safety filter (configs/safety-filter.yaml) in front of a
 * scripted backend that answers whatever a generated scenario says — a known credential or piece
 * of personal data in the content, the refusal or a tool call's arguments; whole or streamed and
 * split at any chunk (and byte) boundary; identity, gzip, br or deflate; valid, invalid or cut
 * short; JSON, text/plain or no content type; with JSON escapes hiding the value from a byte
 * search. Driven by raw HTTP (every byte the client gets is looked at, also of a cut stream) and by
 * the official `openai` SDK. Invariants:
 *
 * - the value never reaches the client unmasked (not in the bytes, not in any decoded string, not
 *   in the concatenated deltas of a stream);
 * - a whole answer's X-Filter-Decision header matches the audit trail (allow: no record; redact:
 *   a redact record; block: a block or unchecked record);
 * - every stream the filter ended or masked is on record (a content_filter ending or error event:
 *   a block or unchecked record; a masked value: a redact record), and a stream that completed
 *   normally has no block on record.
 */

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

const devKey = 'sk-dev-local-0001';
const adminToken = 'bypass-admin-token';

/** Values the shipped policy must never let out: a credential (blocked) and personal data (masked). */
const secrets = {
  aws: 'AKIAZ7Q3K5M2N8P4R6T1',
  email: 'jane.doe@example.org',
  card: '4111 1111 1111 1111',
} as const;
type SecretKind = keyof typeof secrets;

type Where = 'content' | 'refusal' | 'tool_args';
type Form = 'valid' | 'invalid' | 'truncated';
type Encoding = 'identity' | 'gzip' | 'br' | 'deflate';

interface Scenario {
  kind: SecretKind;
  where: Where;
  prefix: number;
  suffix: number;
  streamed: boolean;
  /** Where the text is cut into streamed deltas (fractions of its length). */
  cuts: number[];
  /** Where the body bytes are cut into separate writes (fractions of its length). */
  writes: number[];
  encoding: Encoding;
  form: Form;
  contentType: 'json' | 'text' | 'none';
  escape: boolean;
}

const filler = 'The weather report says it will be sunny with light winds along the coast. '.repeat(12);

function textOf(s: Scenario): string {
  // Separated by spaces: the detectors look for whole values, not runs inside longer tokens.
  return `${filler.slice(0, s.prefix)} ${secrets[s.kind]} ${filler.slice(0, s.suffix)}`;
}

/** What the model "says" in the chosen field (tool arguments are a JSON text, as in the API). */
function fieldText(s: Scenario): string {
  return s.where === 'tool_args' ? JSON.stringify({ note: textOf(s) }) : textOf(s);
}

/** JSON with every character of the secret written as a \\u escape (a byte search cannot see it). */
function escaped(json: string, kind: SecretKind): string {
  const secret = secrets[kind];
  const hidden = [...secret].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
  return json.split(secret).join(hidden);
}

function wholeAnswer(s: Scenario): string {
  const text = fieldText(s);
  const message: Record<string, unknown> = { role: 'assistant', content: null };
  if (s.where === 'content') message.content = text;
  if (s.where === 'refusal') message.refusal = text;
  if (s.where === 'tool_args') {
    message.tool_calls = [{ id: 'call_1', type: 'function', function: { name: 'note', arguments: text } }];
  }
  const json = JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, message, finish_reason: s.where === 'tool_args' ? 'tool_calls' : 'stop' }],
  });
  return s.escape && s.where !== 'tool_args' ? escaped(json, s.kind) : json;
}

function streamedAnswer(s: Scenario): string {
  const text = fieldText(s);
  const points = [...new Set(s.cuts.map((c) => Math.floor(c * text.length)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let at = 0;
  for (const p of [...points, text.length]) {
    if (p > at) pieces.push(text.slice(at, p));
    at = Math.max(at, p);
  }
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'gpt-4o-mini',
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  const events = [chunk({ role: 'assistant', content: '' })];
  if (s.where === 'tool_args') {
    events.push(
      chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'note', arguments: '' } }] }),
    );
  }
  for (const piece of pieces) {
    const delta =
      s.where === 'content'
        ? { content: piece }
        : s.where === 'refusal'
          ? { refusal: piece }
          : { tool_calls: [{ index: 0, function: { arguments: piece } }] };
    const json = chunk(delta);
    events.push(s.escape && s.where !== 'tool_args' ? escaped(json, s.kind) : json);
  }
  events.push(chunk({}, s.where === 'tool_args' ? 'tool_calls' : 'stop'));
  if (s.form === 'invalid') events.splice(Math.min(2, events.length - 1), 0, '{"choices": [oops');
  let body = events.map((e) => `data: ${e}\n\n`).join('');
  if (s.form !== 'truncated') body += 'data: [DONE]\n\n';
  return body;
}

/** The backend's answer to a scenario: headers and the body's writes. */
function backendAnswer(s: Scenario): { headers: Record<string, string>; writes: Buffer[]; cut: boolean } {
  let body = Buffer.from(s.streamed ? streamedAnswer(s) : wholeAnswer(s));
  if (!s.streamed && s.form === 'invalid')
    body = Buffer.concat([body.subarray(0, body.length - 7), Buffer.from('oops')]);
  const headers: Record<string, string> = {};
  if (s.streamed) headers['content-type'] = 'text/event-stream';
  else if (s.contentType === 'json') headers['content-type'] = 'application/json';
  else if (s.contentType === 'text') headers['content-type'] = 'text/plain';
  if (s.encoding !== 'identity') {
    headers['content-encoding'] = s.encoding;
    body = s.encoding === 'gzip' ? gzipSync(body) : s.encoding === 'br' ? brotliCompressSync(body) : deflateSync(body);
  }
  // A whole answer cut short: it announced more than it sends.
  const cut = !s.streamed && s.form === 'truncated';
  const sent = cut ? body.subarray(0, Math.floor(body.length / 2)) : body;
  if (!s.streamed) headers['content-length'] = String(body.length);
  const points = [...new Set(s.writes.map((w) => Math.floor(w * sent.length)))].sort((a, b) => a - b);
  const writes: Buffer[] = [];
  let at = 0;
  for (const p of [...points, sent.length]) {
    if (p > at) writes.push(sent.subarray(at, p));
    at = Math.max(at, p);
  }
  return { headers, writes, cut };
}

const scenarios = new Map<number, Scenario>();
let nextId = 1;

async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const c of req) raw += c;
  const id = Number(/scenario (\d+)/.exec(raw)?.[1]);
  const s = scenarios.get(id);
  if (!s) {
    res.writeHead(404).end();
    return;
  }
  const { headers, writes, cut } = backendAnswer(s);
  res.writeHead(200, headers);
  for (const w of writes) {
    res.write(w);
    await new Promise((r) => setImmediate(r)); // separate chunks on the wire
  }
  if (cut) res.socket?.destroy();
  else res.end();
}

const backend = createServer((req, res) => void serve(req, res).catch(() => res.destroy()));
let svc: StartedService;
let client: OpenAI;
let base: string;

beforeAll(async () => {
  base = await listenLocal(backend);
  const dir = mkdtempSync(join(tmpdir(), 'sy-bypass-'));
  // The shipped tenants, without the rate limit getting in the way of a few hundred requests.
  const tenants = readFileSync('configs/safety-filter/tenants.yaml', 'utf8').replace(
    /requests_per_minute: \d+/g,
    'requests_per_minute: 100000',
  );
  writeFileSync(join(dir, 'tenants.yaml'), tenants);
  svc = await startService('configs/safety-filter.yaml', {
    env: {
      FILTER_BACKEND_URL: `${base}/v1`,
      FILTER_ADMIN_TOKEN: adminToken,
      FILTER_AUDIT_PATH: join(dir, 'audit.db'),
      FILTER_TENANTS_FILE: join(dir, 'tenants.yaml'),
    },
  });
  client = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: devKey, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  closeNow(backend);
});

const fraction = fc.double({ min: 0, max: 1, noNaN: true });
const scenario = (forms: Form[] = ['valid', 'invalid', 'truncated']) =>
  fc.record<Scenario>({
    kind: fc.constantFrom<SecretKind>('aws', 'email', 'card'),
    where: fc.constantFrom<Where>('content', 'refusal', 'tool_args'),
    prefix: fc.integer({ min: 0, max: 700 }),
    suffix: fc.integer({ min: 0, max: 200 }),
    streamed: fc.boolean(),
    cuts: fc.array(fraction, { maxLength: 40 }),
    writes: fc.array(fraction, { maxLength: 8 }),
    encoding: fc.constantFrom<Encoding>('identity', 'identity', 'gzip', 'br', 'deflate'),
    form: fc.constantFrom(...forms),
    contentType: fc.constantFrom<Scenario['contentType']>('json', 'json', 'text', 'none'),
    escape: fc.boolean(),
  });

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The connection ended before the answer was complete. */
  broken: boolean;
}

/** POSTs a chat request and keeps every byte that arrives, also when the connection is cut. */
function rawChat(id: number, stream: boolean): Promise<RawAnswer> {
  const payload = JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: `scenario ${id}` }],
    stream,
  });
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${svc.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${devKey}` },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let done = false;
      const finish = (broken: boolean) => {
        if (done) return;
        done = true;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString(), broken });
      };
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => finish(false));
      res.on('error', () => finish(true));
      res.on('aborted', () => finish(true));
      res.on('close', () => finish(!res.complete));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Every string in a JSON value, tool-call arguments (a JSON text) opened too. */
function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') {
    out.push(value);
    if (value.startsWith('{')) {
      try {
        strings(JSON.parse(value), out);
      } catch {}
    }
  } else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) strings(v, out);
  return out;
}

interface StreamView {
  /** Deltas joined per field: what a client reassembles. */
  joined: string[];
  done: boolean;
  filtered: boolean;
  all: string[];
}

function readStream(body: string): StreamView {
  const fields = { content: '', refusal: '', tool_args: '' };
  const all: string[] = [];
  let done = false;
  let filtered = false;
  for (const block of body.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (data === '') continue;
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(data);
    } catch {
      all.push(data);
      continue;
    }
    strings(event, all);
    if (event.error) filtered = true;
    for (const c of (event.choices as Array<Record<string, unknown>> | undefined) ?? []) {
      if (c.finish_reason === 'content_filter') filtered = true;
      const d = (c.delta ?? {}) as Record<string, unknown>;
      if (typeof d.content === 'string') fields.content += d.content;
      if (typeof d.refusal === 'string') fields.refusal += d.refusal;
      for (const t of (d.tool_calls as Array<{ function?: { arguments?: string } }> | undefined) ?? []) {
        fields.tool_args += t.function?.arguments ?? '';
      }
    }
  }
  return { joined: Object.values(fields), done, filtered, all };
}

/** The audit records of a request (non-allow decisions: the shipped config records those). */
async function audited(requestId: string): Promise<string[]> {
  const res = await fetch(`${svc.url}/audit?tenant=dev&limit=1000`, { headers: { 'x-admin-token': adminToken } });
  const body = (await res.json()) as { records: Array<{ request_id: string; action: string }> };
  return body.records.filter((r) => r.request_id === requestId).map((r) => r.action);
}

const refused = (actions: string[]) => actions.some((a) => a === 'block' || a === 'unchecked');
const placeholders = /\[(EMAIL|CREDIT_CARD|[A-Z_]+)\]/;

async function checkScenario(s: Scenario): Promise<void> {
  const id = nextId++;
  scenarios.set(id, s);
  const secret = secrets[s.kind];
  const answer = await rawChat(id, s.streamed);
  scenarios.delete(id);
  const label = JSON.stringify({ ...s, status: answer.status, body: answer.body.slice(0, 600) });
  const requestId = String(answer.headers['x-filter-request-id']);
  const actions = await audited(requestId);

  // 1. Never unmasked: not in the bytes, not in a decoded string, not across deltas.
  expect(answer.body.includes(secret), label).toBe(false);
  const isStream = String(answer.headers['content-type'] ?? '').startsWith('text/event-stream');
  if (isStream) {
    const view = readStream(answer.body);
    for (const text of [...view.joined, ...view.all]) expect(text.includes(secret), label).toBe(false);
    // 3. What the client saw of the stream's end is on record.
    if (view.filtered) expect(refused(actions), label).toBe(true);
    if (view.done && !view.filtered) expect(refused(actions), label).toBe(false);
    if (view.joined.some((t) => placeholders.test(t))) expect(actions, label).toContain('redact');
    if (!view.done) expect(view.filtered || answer.broken, label).toBe(true);
  } else {
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer.body);
    } catch {
      parsed = answer.body;
    }
    for (const text of strings(parsed)) expect(text.includes(secret), label).toBe(false);
    // 2. The header says what the audit trail says.
    const decision = answer.headers['x-filter-decision'];
    expect([200, 400, 502], label).toContain(answer.status);
    if (answer.status === 200) {
      expect(['allow', 'redact'], label).toContain(decision);
      if (decision === 'allow') expect(actions, label).toEqual([]);
      else expect(actions, label).toEqual(['redact']);
    } else {
      expect(decision, label).toBe('block');
      expect(refused(actions), label).toBe(true);
      if (answer.status === 502) expect(actions, label).toContain('unchecked');
    }
  }
}

describe('safety filter egress: no silent bypass', () => {
  it('raw HTTP: any answer shape, encoding, chunking and validity', async () => {
    await fc.assert(fc.asyncProperty(scenario(), checkScenario), { numRuns: 150 });
  }, 120_000);

  it('each answer field, whole and streamed, at every kind of boundary (exhaustive over the small dimensions)', async () => {
    for (const kind of Object.keys(secrets) as SecretKind[]) {
      for (const where of ['content', 'refusal', 'tool_args'] as Where[]) {
        for (const streamed of [false, true]) {
          for (const encoding of ['identity', 'gzip', 'br'] as Encoding[]) {
            await checkScenario({
              kind,
              where,
              prefix: 300,
              suffix: 40,
              streamed,
              // Cut inside the value: one delta per character around it.
              cuts: Array.from({ length: 30 }, (_, i) => (300 + i) / (340 + 24 + 30)),
              writes: [0.3, 0.6],
              encoding,
              form: 'valid',
              contentType: 'json',
              escape: false,
            });
          }
        }
      }
    }
  }, 120_000);

  it('the official SDK never gets the value, and gets an error when the filter ends a stream', async () => {
    const run = async (s: Scenario) => {
      const id = nextId++;
      scenarios.set(id, s);
      const secret = secrets[s.kind];
      const seen: string[] = [];
      let failed = false;
      try {
        if (s.streamed) {
          const stream = await client.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: `scenario ${id}` }],
            stream: true,
          });
          const fields = ['', '', ''];
          for await (const chunk of stream) {
            const d = chunk.choices[0]?.delta;
            fields[0] += d?.content ?? '';
            fields[1] += (d as { refusal?: string } | undefined)?.refusal ?? '';
            fields[2] += d?.tool_calls?.map((t) => t.function?.arguments ?? '').join('') ?? '';
          }
          seen.push(...fields);
        } else {
          const done = await client.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: `scenario ${id}` }],
          });
          seen.push(...strings(done));
        }
      } catch (err) {
        failed = true;
        expect(err).toBeInstanceOf(OpenAI.APIError);
      } finally {
        scenarios.delete(id);
      }
      for (const text of seen) expect(text.includes(secret), JSON.stringify(s)).toBe(false);
      // A credential is always refused, whatever the shape: the SDK never completes normally.
      if (s.kind === 'aws') expect(failed, JSON.stringify(s)).toBe(true);
    };
    await fc.assert(fc.asyncProperty(scenario(['valid']), run), { numRuns: 60 });
  }, 120_000);
});

/** Another filter from the shipped config, with `set` overrides, in front of the same backend. */
async function startVariant(set: string[]): Promise<StartedService> {
  const dir = mkdtempSync(join(tmpdir(), 'sy-bypass-variant-'));
  return startService('configs/safety-filter.yaml', {
    env: { FILTER_BACKEND_URL: `${base}/v1`, FILTER_ADMIN_TOKEN: adminToken, FILTER_AUDIT_PATH: join(dir, 'audit.db') },
    set,
  });
}

/** The audit records of one request on a filter: [action, details]. */
async function auditOf(
  filter: StartedService,
  requestId: string | null,
): Promise<Array<[string, Record<string, unknown>]>> {
  const res = await fetch(`${filter.url}/audit?tenant=dev`, { headers: { 'x-admin-token': adminToken } });
  const body = (await res.json()) as {
    records: Array<{ request_id: string; action: string; details: Record<string, unknown> }>;
  };
  return body.records.filter((r) => r.request_id === requestId).map((r) => [r.action, r.details]);
}

describe('safety filter egress: the explicit opt-out', () => {
  let passing: StartedService;
  // The chat route's egress policy stage lets what it cannot read through.
  beforeAll(async () => {
    passing = await startVariant(['routes.0.pipeline.7.on_uninspectable=pass']);
  }, 30_000);
  afterAll(() => passing?.close());

  it('on_uninspectable: pass lets an unreadable answer through, marked, counted and audited as passed-unchecked', async () => {
    const id = nextId++;
    scenarios.set(id, {
      kind: 'aws',
      where: 'content',
      prefix: 10,
      suffix: 10,
      streamed: false,
      cuts: [],
      writes: [],
      encoding: 'identity',
      form: 'valid',
      contentType: 'text',
      escape: false,
    });
    const res = await fetch(`${passing.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${devKey}` },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `scenario ${id}` }] }),
    });
    scenarios.delete(id);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-answer-unchecked')).toBe('content_type');
    expect(res.headers.get('x-filter-decision')).toBe('allow');
    expect(await res.text()).toContain(secrets.aws); // what the operator chose: passed unread
    const records = await auditOf(passing, res.headers.get('x-filter-request-id'));
    expect(records.map(([action, details]) => [action, details.reason])).toEqual([
      ['passed-unchecked', 'content_type'],
    ]);
    const metrics = await (await fetch(`${passing.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_answers_unchecked_total\{[^}]*reason="content_type",outcome="passed"/);
  });
});

describe('safety filter egress: a hold-back smaller than a match', () => {
  let noHoldback: StartedService;
  beforeAll(async () => {
    noHoldback = await startVariant(['routes.0.pipeline.7.policy.egress.holdback_chars=0']);
  }, 30_000);
  afterAll(() => noHoldback?.close());

  it('a redaction of text already sent ends the stream as a block (content_filter), audited, never a silent allow', async () => {
    const id = nextId++;
    // The address arrives one character per delta: with nothing held back, its start is sent
    // before it can be recognised.
    scenarios.set(id, {
      kind: 'email',
      where: 'content',
      prefix: 300,
      suffix: 40,
      streamed: true,
      cuts: Array.from({ length: 24 }, (_, i) => (301 + i) / 362),
      writes: [],
      encoding: 'identity',
      form: 'valid',
      contentType: 'json',
      escape: false,
    });
    const res = await fetch(`${noHoldback.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${devKey}` },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: `scenario ${id}` }],
        stream: true,
      }),
    });
    const view = readStream(await res.text());
    scenarios.delete(id);
    // The operator chose exposure (the address may have been sent whole before the check saw
    // it): the stream still ends filtered, not as a normal answer.
    expect(view.filtered).toBe(true);
    const records = await auditOf(noHoldback, res.headers.get('x-filter-request-id'));
    expect(records.map(([action, details]) => [action, details.redact_after_send])).toEqual([['block', true]]);
  });
});
