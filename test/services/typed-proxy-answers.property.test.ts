/**
 * No silent bypass, typed-proxy side: configs/typed-proxy.yaml (strict) in front of a scripted
 * JSON-RPC upstream over HTTP (the MCP streamable-HTTP wire format: JSON or SSE answers). The
 * upstream answers a generated mix of valid responses and broken ones: not JSON, not JSON-RPC,
 * another id, both or neither of result/error, cut short, text/plain, gzip (valid once decoded),
 * an unknown encoding; SSE streams with non-JSON events, a response with another id, or none
 * before the end; results that fail their SType's output schema. Invariant: the client gets the
 * upstream's response only when it is a well-formed response to its request (and its result
 * passes the output schema); anything else comes back as a JSON-RPC error with the request's id
 * (-32603: 502 for a whole answer, an error event ending a stream), never as a 200 success.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

type Fault =
  | 'none'
  | 'not_json'
  | 'not_rpc'
  | 'other_id'
  | 'both'
  | 'neither'
  | 'cut'
  | 'text_plain'
  | 'gzip'
  | 'unknown_encoding'
  | 'bad_output';

interface Scenario {
  sse: boolean;
  fault: Fault;
  /** SSE only: a notification before the response, a non-JSON event, no response at all. */
  extra: 'none' | 'notification' | 'garbage_event' | 'no_response';
  writes: number[];
}

const scenarios = new Map<string, Scenario>();

function responseFor(id: unknown, s: Scenario, tool: string): Record<string, unknown> {
  const structured =
    s.fault === 'bad_output'
      ? { temperature: 'hot', conditions: 'sunny', humidity: 400 }
      : { temperature: 21, conditions: 'clear', humidity: 40 };
  const result =
    tool === 'get-structured-content'
      ? { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured }
      : { content: [{ type: 'text', text: 'Echo: hi' }] };
  switch (s.fault) {
    case 'not_rpc':
      return { hello: 'world' };
    case 'other_id':
      return { jsonrpc: '2.0', id: `${String(id)}-other`, result };
    case 'both':
      return { jsonrpc: '2.0', id, result, error: { code: 1, message: 'x' } };
    case 'neither':
      return { jsonrpc: '2.0', id };
    default:
      return { jsonrpc: '2.0', id, result };
  }
}

async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const c of req) raw += c;
  const msg = JSON.parse(raw || '{}');
  const s = scenarios.get(String(msg.id));
  if (!s) {
    res.writeHead(202).end();
    return;
  }
  const tool = msg.params?.name;
  const response = JSON.stringify(responseFor(msg.id, s, tool));
  let body: Buffer;
  const headers: Record<string, string> = {};
  if (s.sse) {
    headers['content-type'] = 'text/event-stream';
    let text = '';
    if (s.extra === 'notification')
      text += `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n`;
    if (s.extra === 'garbage_event') text += 'event: message\ndata: {not json\n\n';
    if (s.extra !== 'no_response')
      text += `event: message\ndata: ${s.fault === 'not_json' ? '{"jsonrpc": "2.0", "id"' : response}\n\n`;
    body = Buffer.from(text);
  } else {
    headers['content-type'] = s.fault === 'text_plain' ? 'text/plain' : 'application/json';
    body = Buffer.from(s.fault === 'not_json' ? response.slice(0, -3) : response);
  }
  if (s.fault === 'gzip' || s.fault === 'unknown_encoding') {
    headers['content-encoding'] = s.fault === 'gzip' ? 'gzip' : 'compress';
    body = gzipSync(body);
  }
  if (!s.sse) headers['content-length'] = String(body.length);
  res.writeHead(200, headers);
  const sent = s.fault === 'cut' ? body.subarray(0, Math.floor(body.length / 2)) : body;
  const points = [...new Set(s.writes.map((w) => Math.floor(w * sent.length)))].sort((a, b) => a - b);
  let at = 0;
  for (const p of [...points, sent.length]) {
    if (p > at) res.write(sent.subarray(at, p));
    at = Math.max(at, p);
    await new Promise((r) => setImmediate(r));
  }
  if (s.fault === 'cut') res.socket?.destroy();
  else res.end();
}

const upstream = createServer((req, res) => void serve(req, res).catch(() => res.destroy()));
let svc: StartedService;

beforeAll(async () => {
  const base = await listenLocal(upstream);
  svc = await startService('configs/typed-proxy.yaml', {
    set: [`upstreams.everything={kind: jsonrpc, url: "${base}/"}`],
  });
}, 120_000);

afterAll(async () => {
  await svc?.close();
  closeNow(upstream);
});

let n = 0;

/** Whether the upstream's answer is a well-formed response to the request (once decoded). */
function valid(s: Scenario): boolean {
  if (!s.sse) return ['none', 'gzip', 'bad_output'].includes(s.fault);
  // (A stream keeps its content type: `text_plain` does not apply to it.)
  return (
    ['none', 'gzip', 'text_plain', 'bad_output'].includes(s.fault) &&
    !['garbage_event', 'no_response'].includes(s.extra)
  );
}

async function check(s: Scenario, tool: 'echo' | 'get-structured-content'): Promise<void> {
  const id = `req-${++n}`;
  scenarios.set(id, s);
  const args = tool === 'echo' ? { message: 'hi' } : { location: 'Chicago' };
  const res = await fetch(`${svc.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args } }),
  }).catch((err: unknown) => ({ failed: err }) as const);
  scenarios.delete(id);
  const label = JSON.stringify({ ...s, tool });
  if ('failed' in res) {
    // A connection cut before the headers (an upstream stream that broke): never a success.
    expect(valid(s), label).toBe(false);
    return;
  }
  let text: string;
  try {
    text = await res.text();
  } catch {
    // A stream cut off: never a success.
    expect(valid(s), label).toBe(false);
    return;
  }
  const messages: Array<Record<string, unknown>> = [];
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    for (const block of text.split(/\n\n/)) {
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data === '') continue;
      const parsed = JSON.parse(data); // every event the client gets is JSON
      if (!('method' in parsed)) messages.push(parsed);
    }
  } else {
    messages.push(JSON.parse(text));
  }
  expect(messages.length, label).toBe(1);
  const [answer] = messages;
  if (answer.error === 'upstream_error') {
    // The upstream went away before its answer started: a transport-level 502 (the simple body).
    expect(valid(s), label).toBe(false);
    expect(res.status, label).toBe(502);
    return;
  }
  expect(answer.jsonrpc, label).toBe('2.0');
  expect(answer.id, label).toBe(id);
  const outputFails = tool === 'get-structured-content' && s.fault === 'bad_output';
  if (valid(s)) {
    if (outputFails) {
      expect((answer.error as { message?: string })?.message, label).toBe('Result validation failed');
    } else {
      expect(res.status, label).toBe(200);
      expect(answer.result, label).toBeDefined();
    }
  } else {
    expect(answer.result, label).toBeUndefined();
    expect((answer.error as { code?: number })?.code, label).toBe(-32603);
    if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) expect(res.status, label).toBe(502);
  }
}

const scenario = fc.record<Scenario>({
  sse: fc.boolean(),
  fault: fc.constantFrom<Fault>(
    'none',
    'not_json',
    'not_rpc',
    'other_id',
    'both',
    'neither',
    'cut',
    'text_plain',
    'gzip',
    'unknown_encoding',
    'bad_output',
  ),
  extra: fc.constantFrom<Scenario['extra']>('none', 'notification', 'garbage_event', 'no_response'),
  writes: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
});

describe('typed proxy: answers that are not the response to the request never pass as one', () => {
  it('any fault, JSON or SSE, split anywhere (tools/call of echo and of a tool with an output schema)', async () => {
    await fc.assert(
      fc.asyncProperty(
        scenario,
        fc.constantFrom<'echo' | 'get-structured-content'>('echo', 'get-structured-content'),
        check,
      ),
      { numRuns: 150 },
    );
  }, 120_000);

  it('counts what it refused in switchyard_answers_unchecked_total', async () => {
    await check({ sse: false, fault: 'not_json', extra: 'none', writes: [] }, 'echo');
    const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(text).toMatch(
      // The first stage to read the answer refuses it: the egress policy (tool results), deepest of the readers.
      /switchyard_answers_unchecked_total\{stage="jsonrpc:policy",reason="invalid_json",outcome="refused"/,
    );
  });
});
