/**
 * Streamed egress at unguarded speed (issue 26), through the real safety filter
 * (configs/safety-filter.yaml) with the official `openai` SDK as client, in front of a scripted
 * upstream speaking real SSE that stops at a gate until the test opens it. Nothing here measures
 * time: "released without waiting" is what the client has received while the upstream is still
 * stopped at its gate, before it sent what follows.
 *
 * - clean text reaches the client before the upstream sends the next chunk; personal data in the
 *   first sentence: the text before it too, and the address never;
 * - a streamed tool call's deltas are held until its arguments are complete and checked (a call the
 *   policy blocks never reaches the client), while text around it is not held for it;
 * - block detectors that fire on a prefix (a JWT-like run, `Bearer` and a long value, an unfinished
 *   BEGIN line) decide on the completed match: a clean stream ends normally;
 * - the decision of a stream comes as an HTTP trailer (`Trailer: X-Filter-Decision`) and in its last
 *   event; an upstream that fails before the first byte gets an error answer, not a crash.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

const devKey = 'sk-dev-local-0001';
const adminToken = 'release-admin-token';

/** A step of a scripted answer: an SSE event's JSON, a gate to wait at, or a cut connection. */
type Step = { event: Record<string, unknown> | '[DONE]' } | { gate: Gate } | { cut: true };

/** A point the upstream stops at until the test opens it; `reached` once the upstream waits there. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((r) => {
    this.open = r;
  });
  isOpen = false;
  reached!: () => void;
  readonly waiting = new Promise<void>((r) => {
    this.reached = r;
  });
  constructor() {
    void this.opened.then(() => {
      this.isOpen = true;
    });
  }
}

const base = { id: 'chatcmpl-r', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini' };
const content = (text: string) => ({
  event: { ...base, choices: [{ index: 0, delta: { content: text }, finish_reason: null }] },
});
const role = () => ({
  event: { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
});
const finish = (reason = 'stop') => ({ event: { ...base, choices: [{ index: 0, delta: {}, finish_reason: reason }] } });
const done = (): Step => ({ event: '[DONE]' });
const toolDelta = (args: string, first = false) => ({
  event: {
    ...base,
    choices: [
      {
        index: 0,
        delta: {
          tool_calls: [
            first
              ? { index: 0, id: 'call_1', type: 'function', function: { name: 'send_mail', arguments: args } }
              : { index: 0, function: { arguments: args } },
          ],
        },
        finish_reason: null,
      },
    ],
  },
});
/** A text as 4-character content deltas (a model's pace in tokens). */
const deltas = (text: string) =>
  Array.from({ length: Math.ceil(text.length / 4) }, (_, i) => content(text.slice(4 * i, 4 * i + 4)));

const scripts = new Map<number, Step[]>();
let nextId = 1;

async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const c of req) raw += c;
  const steps = scripts.get(Number(/script (\d+)/.exec(raw)?.[1]));
  if (!steps) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const step of steps) {
    if ('gate' in step) {
      step.gate.reached();
      await step.gate.opened;
    } else if ('cut' in step) {
      res.socket?.destroy();
      return;
    } else res.write(`data: ${step.event === '[DONE]' ? '[DONE]' : JSON.stringify(step.event)}\n\n`);
  }
  res.end();
}

const upstream = createServer((req, res) => void serve(req, res).catch(() => res.destroy()));
let svc: StartedService;
let client: OpenAI;

beforeAll(async () => {
  const url = await listenLocal(upstream);
  const dir = mkdtempSync(join(tmpdir(), 'sy-release-'));
  writeFileSync(join(dir, 'tenants.yaml'), readFileSync('configs/safety-filter/tenants.yaml', 'utf8'));
  svc = await startService('configs/safety-filter.yaml', {
    env: {
      FILTER_BACKEND_URL: `${url}/v1`,
      FILTER_ADMIN_TOKEN: adminToken,
      FILTER_AUDIT_PATH: join(dir, 'audit.db'),
      FILTER_TENANTS_FILE: join(dir, 'tenants.yaml'),
    },
  });
  client = new OpenAI({ baseURL: `${svc.url}/v1`, apiKey: devKey, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  closeNow(upstream);
});

function script(steps: Step[]): number {
  const id = nextId++;
  scripts.set(id, steps);
  return id;
}

type Chunk = OpenAI.Chat.Completions.ChatCompletionChunk & { filter_decision?: { action: string; rule?: string } };

/** Opens a stream of the script through the filter with the SDK. */
async function open(id: number) {
  return (await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: `script ${id}` }],
    stream: true,
  })) as unknown as AsyncIterable<Chunk>;
}

/** Reads chunks until `until` holds for the text so far; the iterator stays usable. */
async function readUntil(it: AsyncIterator<Chunk>, seen: Chunk[], until: (text: string) => boolean): Promise<string> {
  let text = seen.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  while (!until(text)) {
    const r = await it.next();
    if (r.done) break;
    seen.push(r.value);
    text += r.value.choices[0]?.delta?.content ?? '';
  }
  return text;
}

async function readRest(it: AsyncIterator<Chunk>, seen: Chunk[]): Promise<unknown> {
  try {
    for (let r = await it.next(); !r.done; r = await it.next()) seen.push(r.value);
  } catch (err) {
    return err;
  }
  return undefined;
}

const textOf = (seen: Chunk[]) => seen.map((c) => c.choices[0]?.delta?.content ?? '').join('');
const toolArgs = (seen: Chunk[]) =>
  seen.map((c) => c.choices[0]?.delta?.tool_calls?.map((t) => t.function?.arguments ?? '').join('') ?? '').join('');

describe('streamed egress releases what no match can grow into, at once', () => {
  it('clean text reaches the client while the upstream is stopped before its next chunk', async () => {
    const gate = new Gate();
    const id = script([
      role(),
      ...deltas('The weather report says it will be sunny. '),
      { gate },
      ...deltas('Light winds. '),
      finish(),
      done(),
    ]);
    const it = (await open(id))[Symbol.asyncIterator]();
    const seen: Chunk[] = [];
    const before = await readUntil(it, seen, (t) => t === 'The weather report says it will be sunny. ');
    expect(before).toBe('The weather report says it will be sunny. ');
    expect(gate.isOpen).toBe(false); // all of it came while the upstream waited
    gate.open();
    expect(await readRest(it, seen)).toBeUndefined();
    expect(textOf(seen)).toBe('The weather report says it will be sunny. Light winds. ');
    expect(seen.at(-1)?.filter_decision).toEqual({ action: 'allow' });
  });

  it('personal data in the first sentence: the text before it is released, the address never', async () => {
    const gate = new Gate();
    const id = script([
      role(),
      ...deltas('Sure, write to jane.doe@exam'),
      { gate },
      ...deltas('ple.org for the details. '),
      finish(),
      done(),
    ]);
    const it = (await open(id))[Symbol.asyncIterator]();
    const seen: Chunk[] = [];
    expect(await readUntil(it, seen, (t) => t.startsWith('Sure, write to '))).toBe('Sure, write to ');
    expect(gate.isOpen).toBe(false);
    gate.open();
    expect(await readRest(it, seen)).toBeUndefined();
    expect(textOf(seen)).toBe('Sure, write to [EMAIL] for the details. ');
    expect(seen.at(-1)?.filter_decision).toMatchObject({ action: 'redact', rule: 'redact-pii-in-answer' });
  });
});

describe('streamed tool calls', () => {
  it('are held until their arguments are complete and checked; text around them is not held for them', async () => {
    const gate = new Gate();
    const id = script([
      role(),
      ...deltas('Let me send it. '),
      toolDelta('', true),
      toolDelta('{"to": "ops@'),
      toolDelta('example.org", "body": "hi"}'),
      ...deltas('Sending now. '),
      { gate },
      finish('tool_calls'),
      done(),
    ]);
    const it = (await open(id))[Symbol.asyncIterator]();
    const seen: Chunk[] = [];
    // The text after the tool call's deltas arrives while the upstream waits before the finish,
    // and none of the call has: SSE keeps order, so the call was held while the text went by.
    expect(await readUntil(it, seen, (t) => t.endsWith('Sending now. '))).toBe('Let me send it. Sending now. ');
    expect(gate.isOpen).toBe(false);
    expect(seen.some((c) => c.choices[0]?.delta?.tool_calls)).toBe(false);
    gate.open();
    expect(await readRest(it, seen)).toBeUndefined();
    // Then the call, whole, checked: its address masked as in a whole answer.
    expect(toolArgs(seen)).toBe('{"to": "[EMAIL]", "body": "hi"}');
    expect(seen.find((c) => c.choices[0]?.delta?.tool_calls)?.choices[0]?.delta?.tool_calls?.[0]?.function?.name).toBe(
      'send_mail',
    );
  });

  it('a call the policy blocks never reaches the client (the text before it did)', async () => {
    const id = script([
      role(),
      ...deltas('Here you go. '),
      toolDelta('', true),
      toolDelta('{"key": "AKIAZ7Q3'),
      toolDelta('K5M2N8P4R6T1"}'),
      finish('tool_calls'),
      done(),
    ]);
    const seen: Chunk[] = [];
    const err = await readRest((await open(id))[Symbol.asyncIterator](), seen);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(textOf(seen)).toBe('Here you go. ');
    expect(seen.some((c) => c.choices[0]?.delta?.tool_calls)).toBe(false);
    expect(seen.at(-1)?.choices[0]?.finish_reason).toBe('content_filter');
    expect(seen.at(-1)?.filter_decision).toMatchObject({ action: 'block', rule: 'block-secrets-in-answer' });
  });
});

describe('block detectors that fire on a prefix decide on the completed match', () => {
  const b64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';
  const run = (n: number) => Array.from({ length: n }, (_, i) => b64[(i * 7 + 3) % b64.length]).join('');
  const clean = {
    'a JWT-like run of 300 characters that is no token': `The id is eyJ${run(300)} and that is all. `,
    '`Bearer` and 300 characters that are no credential': `Send Bearer ${'abcd'.repeat(75)} as the example says. `,
    'an unfinished BEGIN line of something else': `-----BEGIN SOMETHINGWITHAVERYLONGNAMEHERE ${'x'.repeat(40)} is not a key. `,
  };
  for (const [name, text] of Object.entries(clean)) {
    it(`${name}: the stream ends normally, whole`, async () => {
      const seen: Chunk[] = [];
      const err = await readRest(
        (await open(script([role(), ...deltas(text), finish(), done()])))[Symbol.asyncIterator](),
        seen,
      );
      expect(err).toBeUndefined();
      expect(textOf(seen)).toBe(text);
      expect(seen.some((c) => c.choices[0]?.finish_reason === 'content_filter')).toBe(false);
    });
  }

  it('a real JWT still ends the stream, none of it sent', async () => {
    const header = Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url');
    const jwt = `${header}.eyJ${run(40)}.${run(43)}`;
    const seen: Chunk[] = [];
    const err = await readRest(
      (await open(script([role(), ...deltas(`Your token: ${jwt} keep it safe. `), finish(), done()])))[
        Symbol.asyncIterator
      ](),
      seen,
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(textOf(seen)).toBe('Your token: ');
  });
});

/** A streamed chat over raw HTTP/1.1: status, headers, body and trailers. */
function rawStream(id: number): Promise<{
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
  trailers: Record<string, string | undefined>;
}> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${svc.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${devKey}` },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, trailers: res.trailers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(
      JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `script ${id}` }], stream: true }),
    );
  });
}

describe('the decision of a stream', () => {
  const cases: Array<[string, string, string]> = [
    ['allow', 'Nothing to see here. ', 'allow'],
    ['redact', 'Mail jane.doe@example.org today. ', 'redact'],
    ['block', 'The key is AKIAZ7Q3K5M2N8P4R6T1 now. ', 'block'],
  ];
  for (const [name, text, decision] of cases) {
    it(`comes as an HTTP trailer and in the last event: ${name}`, async () => {
      const res = await rawStream(script([role(), ...deltas(text), finish(), done()]));
      expect(res.status).toBe(200);
      expect(res.headers.trailer).toBe('X-Filter-Decision');
      expect(res.trailers['x-filter-decision']).toBe(decision);
      const events = res.body
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
      const withDecision = events.filter((e) => e.filter_decision !== undefined);
      expect(withDecision).toHaveLength(1);
      expect((withDecision[0].filter_decision as { action: string }).action).toBe(decision);
    });
  }

  it('an upstream that fails before the first byte gets an error answer, no trailer, and the filter goes on', async () => {
    const res = await rawStream(script([{ cut: true }]));
    expect(res.status).toBe(502);
    expect(res.headers.trailer).toBeUndefined();
    expect(JSON.parse(res.body)).toMatchObject({ error: { type: expect.any(String) } });
    const after = await rawStream(script([role(), ...deltas('Still here. '), finish(), done()]));
    expect(after.trailers['x-filter-decision']).toBe('allow');
  });
});
