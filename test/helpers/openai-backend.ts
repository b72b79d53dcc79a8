/**
 * An OpenAI-compatible backend for tests and benchmarks: a node:http server that answers
 * `POST /v1/chat/completions`, `POST /v1/completions` (both also as SSE streams),
 * `POST /v1/embeddings` and `GET /v1/models` in OpenAI's wire format, so that what works
 * against it works against the real API (test/upstreams/openai-backend.test.ts proves it with
 * the official SDK).
 *
 * Per request, the `model` name can ask for special behaviour, which also works through a
 * gateway that passes the body on:
 * - `error-<status>` (e.g. `error-500`, `error-429`): that HTTP status with an OpenAI error body.
 * - `huge-<size>` (`huge-10mb`, `huge-512kb`, `huge-1000`): an answer of exactly that many
 *   characters, generated piece by piece while streaming (never held whole in memory).
 * - `paced-<chars per second>-<size>-<chars per delta>` (`paced-800-1000-4`): an answer of `size`
 *   characters, streamed in deltas of that many characters at that pace, as a model generates it
 *   (for time-to-first-token measurements); 0 characters per second: as fast as it can. With
 *   `-pii` after it (`paced-200-400-4-pii`), the first sentence holds an e-mail address.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body; the raw text when it is not JSON; undefined without a body. */
  // biome-ignore lint/suspicious/noExplicitAny: request bodies are whatever the client sent
  body: any;
}

export interface OpenAiBackendOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** The assistant's answer to a chat or completion request (default: a canned sentence). */
  reply?: (request: RecordedRequest) => string;
  /**
   * The whole assistant message of a non-streamed chat answer, for answers `reply` cannot give
   * (tool calls, a refusal); undefined keeps the usual `{role, content: reply, refusal: null}`.
   */
  message?: (request: RecordedRequest) => Record<string, unknown> | undefined;
  /**
   * Replaces fields of a chat or completion answer's `usage` (e.g. exact token counts, or
   * `prompt_tokens_details.cached_tokens`), streamed or not; `total_tokens` follows unless given.
   * `null`: the answer reports no usage at all (a backend that does not count), streamed or not.
   */
  usage?: (request: RecordedRequest) => Record<string, unknown> | null | undefined;
  /**
   * Stop the answer at the request's `max_completion_tokens` / `max_tokens` (in this fixture's
   * tokens of 4 characters) with `finish_reason: "length"`, as a model does (default false: the
   * whole answer, as a backend that ignores the cap).
   */
  honourMaxTokens?: boolean;
  /** Send non-streamed chat and completion answers without Content-Length (chunked), as some servers do. */
  chunkedJson?: boolean;
  /** Characters per streamed delta (default 16). */
  chunkSize?: number;
  /** Pause between streamed deltas, ms (default 0). */
  chunkDelayMs?: number;
  /** Pause before the first token (streaming) or the whole answer (non-streaming), ms (default 0). */
  firstTokenDelayMs?: number;
  /** When set, requests must carry `Authorization: Bearer <apiKey>`, else 401. */
  apiKey?: string;
  /** Length of embedding vectors unless the request asks for `dimensions` (default 1536). */
  embeddingDimensions?: number;
  /** Keep every request in `requests` (default true; benchmarks turn it off). */
  record?: boolean;
}

export interface OpenAiBackend {
  /** Base URL, ending in /v1. */
  url: string;
  port: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export const cannedAnswer = 'This is a canned answer from the OpenAI-compatible test backend.';
export const fixtureModels = ['gpt-4o-mini', 'gpt-3.5-turbo-instruct', 'text-embedding-3-small'];
const hugeFiller = 'The quick brown fox jumps over the lazy dog. ';

/** Starts the backend on 127.0.0.1 (or `host`). */
export async function startOpenAiBackend(options: OpenAiBackendOptions = {}): Promise<OpenAiBackend> {
  const requests: RecordedRequest[] = [];
  const server = createServer({ keepAlive: true }, openAiHandler(options, requests));
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}/v1`,
    port,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The request handler alone, for a server of one's own (the benchmark's backend process). */
export function openAiHandler(options: OpenAiBackendOptions = {}, requests: RecordedRequest[] = []) {
  return (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res, options, requests).catch((err) => {
      if (!res.headersSent) sendError(res, 500, { message: String(err) });
      else res.destroy();
    });
  };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  options: OpenAiBackendOptions,
  requests: RecordedRequest[],
): Promise<void> {
  const text = await readText(req);
  const request: RecordedRequest = {
    method: req.method ?? 'GET',
    path: req.url ?? '/',
    headers: req.headers,
    body: parseBody(text),
  };
  if (options.record !== false) requests.push(request);
  res.setHeader('x-request-id', `req_${randomBytes(12).toString('hex')}`);

  if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
    return sendError(res, 401, { authorization: req.headers.authorization });
  }
  const route = `${request.method} ${request.path.split('?')[0]}`;
  if (route === 'GET /v1/models') {
    return sendJson(res, 200, { object: 'list', data: fixtureModels.map(modelObject) });
  }
  const modelId = /^GET \/v1\/models\/([^/]+)$/.exec(route)?.[1];
  if (modelId !== undefined) {
    const id = decodeURIComponent(modelId);
    if (fixtureModels.includes(id)) return sendJson(res, 200, modelObject(id));
    return sendError(res, 404, { message: `The model '${id}' does not exist`, code: 'model_not_found' });
  }
  const kind = (
    {
      'POST /v1/chat/completions': 'chat',
      'POST /v1/completions': 'completion',
      'POST /v1/embeddings': 'embedding',
    } as const
  )[route];
  if (!kind) return sendError(res, 404, { message: `Invalid URL (${route})` });

  const body = request.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return sendError(res, 400, {
      message: 'We could not parse the JSON body of your request. (HINT: send a JSON object.)',
    });
  }
  const required = { chat: 'messages', completion: 'prompt', embedding: 'input' }[kind];
  for (const param of ['model', required]) {
    if (body[param] === undefined) {
      const message = `Missing required parameter: '${param}'.`;
      return sendError(res, 400, { message, param, code: 'missing_required_parameter' });
    }
  }
  const model = String(body.model);
  const wanted = /^error-([45]\d\d)$/.exec(model);
  if (wanted) return sendError(res, Number(wanted[1]));
  if (kind === 'embedding') return sendEmbeddings(res, body, options.embeddingDimensions ?? 1536);

  const whole = answerOf(request, options);
  const cap = options.honourMaxTokens ? capOf(body) : undefined;
  const answer = cap !== undefined && whole.length > cap * 4 ? cut(whole, cap * 4) : whole;
  const finish = answer === whole ? 'stop' : 'length';
  const meta = {
    id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`,
    created: Math.floor(Date.now() / 1000),
    model,
  };
  const counted = {
    prompt_tokens: tokens(kind === 'chat' ? messagesText(body.messages) : JSON.stringify(body.prompt)),
    completion_tokens: tokens(answer.length),
  };
  const given = options.usage?.(request);
  const usage: Record<string, unknown> = { ...counted, ...given };
  usage.total_tokens = given?.total_tokens ?? Number(usage.prompt_tokens) + Number(usage.completion_tokens);
  const reported = given === null ? undefined : usage;

  if (body.stream === true) {
    const includeUsage = body.stream_options?.include_usage === true;
    return streamAnswer(res, kind, meta, answer, includeUsage ? reported : undefined, options, body, finish);
  }
  // Only when asked: even a 0 ms timer would add ~1 ms to every answer.
  if (options.firstTokenDelayMs) await sleep(options.firstTokenDelayMs);
  const content = [...answer.pieces(1 << 20)].join('');
  const message = options.message?.(request) ?? { role: 'assistant', content, refusal: null, annotations: [] };
  const choice =
    kind === 'chat'
      ? {
          index: 0,
          message,
          logprobs:
            body.logprobs === true ? chatLogprobs(typeof message.content === 'string' ? message.content : '') : null,
          finish_reason: finish,
        }
      : { text: content, index: 0, logprobs: completionLogprobs(body, content, 0), finish_reason: finish };
  const answerBody = {
    ...meta,
    object: kind === 'chat' ? 'chat.completion' : 'text_completion',
    choices: [choice],
    ...(reported ? { usage: reported } : {}),
  };
  if (!options.chunkedJson) return sendJson(res, 200, answerBody);
  const serialised = JSON.stringify(answerBody);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write(serialised.slice(0, serialised.length >> 1));
  res.end(serialised.slice(serialised.length >> 1));
}

/** The request's cap on generated tokens: `max_completion_tokens`, else `max_tokens`. */
function capOf(body: Record<string, unknown>): number | undefined {
  for (const v of [body.max_completion_tokens, body.max_tokens]) {
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return v;
  }
  return undefined;
}

/** The first `length` characters of an answer. */
function cut(answer: Answer, length: number): Answer {
  return {
    length,
    *pieces(size) {
      let left = length;
      for (const piece of answer.pieces(size)) {
        if (left <= 0) return;
        yield piece.slice(0, left);
        left -= piece.length;
      }
    },
  };
}

/** The answer's length and its text in pieces of at most `size` characters, made on demand. */
interface Answer {
  length: number;
  pieces(size: number): Iterable<string>;
}

function answerOf(request: RecordedRequest, options: OpenAiBackendOptions): Answer {
  const paced = /^paced-\d+-(\d+)-\d+(-pii)?$/.exec(String(request.body.model));
  if (paced) {
    const length = Number(paced[1]);
    if (!paced[2]) return { length, pieces: (size) => fillerPieces(length, size) };
    const text = (PII_SENTENCE + hugeFiller.repeat(Math.ceil(length / hugeFiller.length) + 1)).slice(0, length);
    return {
      length,
      *pieces(size) {
        for (let i = 0; i < text.length; i += size) yield text.slice(i, i + size);
      },
    };
  }
  const huge = /^huge-(\d+)(kb|mb)?$/i.exec(String(request.body.model));
  if (huge) {
    const length = Number(huge[1]) * ({ kb: 1024, mb: 1024 * 1024 }[huge[2]?.toLowerCase() ?? ''] ?? 1);
    return { length, pieces: (size) => fillerPieces(length, size) };
  }
  // Code points, not UTF-16 units, so that a delta never splits a character.
  const chars = Array.from(options.reply ? options.reply(request) : cannedAnswer);
  return {
    length: chars.length,
    *pieces(size) {
      for (let i = 0; i < chars.length; i += size) yield chars.slice(i, i + size).join('');
    },
  };
}

/** The first sentence of a `paced-…-pii` answer: personal data early in the answer. */
export const PII_SENTENCE = 'Sure, you can write to jane.doe@example.org about it. ';

function* fillerPieces(length: number, size: number): Generator<string> {
  const repeated = hugeFiller.repeat(Math.ceil(size / hugeFiller.length) + 1);
  for (let done = 0; done < length; done += size) {
    const offset = done % hugeFiller.length;
    yield repeated.slice(offset, offset + Math.min(size, length - done));
  }
}

type Kind = 'chat' | 'completion';
interface Meta {
  id: string;
  created: number;
  model: string;
}

/** SSE in OpenAI's order: role, content deltas, finish_reason, optional usage, [DONE]. */
async function streamAnswer(
  res: ServerResponse,
  kind: Kind,
  meta: Meta,
  answer: Answer,
  usage: object | undefined,
  options: OpenAiBackendOptions,
  body: Record<string, unknown>,
  finish = 'stop',
): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.flushHeaders();
  const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  // With include_usage every chunk carries `usage: null` except the last one.
  const extra = usage ? { usage: null } : {};
  let sentChars = 0;
  const chunk = (delta: string | { role?: string; content?: string }, finish: string | null) => {
    const text = typeof delta === 'string' ? delta : (delta.content ?? '');
    const choice =
      kind === 'chat'
        ? {
            index: 0,
            delta,
            logprobs: body.logprobs === true && text !== '' ? chatLogprobs(text) : null,
            finish_reason: finish,
          }
        : { text: delta, index: 0, logprobs: completionLogprobs(body, text, sentChars), finish_reason: finish };
    sentChars += text.length;
    return { ...meta, object, choices: [choice], ...extra };
  };

  // Only when asked: even a 0 ms timer would add ~1 ms to every answer.
  if (options.firstTokenDelayMs) await sleep(options.firstTokenDelayMs);
  if (kind === 'chat' && !(await send(res, chunk({ role: 'assistant', content: '' }, null)))) return;
  // A paced model: each delta after the time it takes to generate it.
  const paced = /^paced-(\d+)-\d+-(\d+)(?:-pii)?$/.exec(meta.model);
  const size = paced ? Math.max(1, Number(paced[2])) : (options.chunkSize ?? 16);
  const cps = paced ? Number(paced[1]) : 0;
  const delayMs = paced ? (cps > 0 ? (size * 1000) / cps : undefined) : options.chunkDelayMs;
  for (const piece of answer.pieces(size)) {
    if (delayMs) await sleep(delayMs);
    if (!(await send(res, chunk(kind === 'chat' ? { content: piece } : piece, null)))) return;
  }
  if (!(await send(res, chunk(kind === 'chat' ? {} : '', finish)))) return;
  if (usage && !(await send(res, { ...meta, object, choices: [], usage }))) return;
  res.end('data: [DONE]\n\n');
}

/** A text as tokens of up to four characters (code points), as a tokenizer might cut it. */
function tokensOf(text: string): string[] {
  const chars = Array.from(text);
  const tokens: string[] = [];
  for (let i = 0; i < chars.length; i += 4) tokens.push(chars.slice(i, i + 4).join(''));
  return tokens;
}

/** A chat choice's `logprobs` (asked with `logprobs: true`): each token, its UTF-8 bytes, one alternative. */
function chatLogprobs(text: string): Record<string, unknown> {
  return {
    content: tokensOf(text).map((token) => ({
      token,
      logprob: -0.01,
      bytes: [...Buffer.from(token)],
      top_logprobs: [{ token, logprob: -0.01, bytes: [...Buffer.from(token)] }],
    })),
    refusal: null,
  };
}

/** A completion choice's `logprobs` (asked with `logprobs: <n>`): tokens, their offsets, alternatives. */
function completionLogprobs(
  body: Record<string, unknown>,
  text: string,
  offset: number,
): Record<string, unknown> | null {
  if (typeof body.logprobs !== 'number' || text === '') return null;
  const tokens = tokensOf(text);
  const offsets: number[] = [];
  let at = offset;
  for (const t of tokens) {
    offsets.push(at);
    at += t.length;
  }
  return {
    tokens,
    token_logprobs: tokens.map(() => -0.01),
    top_logprobs: tokens.map((t) => ({ [t]: -0.01 })),
    text_offset: offsets,
  };
}

/** Writes one event, waiting for the socket to drain; false once the client has gone. */
async function send(res: ServerResponse, event: object): Promise<boolean> {
  if (res.destroyed) return false;
  if (!res.write(`data: ${JSON.stringify(event)}\n\n`)) {
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
  return !res.destroyed;
}

function sendEmbeddings(res: ServerResponse, body: Record<string, unknown>, defaultDimensions: number): void {
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  const dimensions = typeof body.dimensions === 'number' ? body.dimensions : defaultDimensions;
  const base64 = body.encoding_format === 'base64';
  const data = inputs.map((input, index) => {
    const vector = embed(typeof input === 'string' ? input : JSON.stringify(input), dimensions);
    return {
      object: 'embedding',
      index,
      embedding: base64 ? Buffer.from(vector.buffer).toString('base64') : Array.from(vector),
    };
  });
  const promptTokens = inputs.reduce((sum: number, input) => sum + tokens(JSON.stringify(input)), 0);
  sendJson(res, 200, {
    object: 'list',
    data,
    model: body.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  });
}

/**
 * A deterministic unit vector for a text (same text, same vector), as float32 so that the float
 * and base64 encodings carry the same numbers.
 */
export function embed(text: string, dimensions: number): Float32Array {
  const seed = createHash('sha256').update(text).digest();
  let state = seed.readUInt32LE(0) || 1;
  const vector = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i++) {
    // xorshift32: cheap, deterministic, good enough to tell texts apart.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    vector[i] = (state >>> 0) / 0xffffffff - 0.5;
  }
  const norm = Math.hypot(...vector) || 1;
  for (let i = 0; i < dimensions; i++) vector[i] /= norm;
  return vector;
}

const errorKinds: Record<number, { type: string; code: string | null; message: string }> = {
  400: { type: 'invalid_request_error', code: null, message: 'Invalid request.' },
  401: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory', message: 'Forbidden.' },
  404: { type: 'invalid_request_error', code: null, message: 'Not found.' },
  429: {
    type: 'requests',
    code: 'rate_limit_exceeded',
    message: 'Rate limit reached on requests per min (RPM). Please try again in 1s.',
  },
  500: {
    type: 'server_error',
    code: null,
    message: 'The server had an error while processing your request. Sorry about that!',
  },
  503: { type: 'server_error', code: null, message: 'The engine is currently overloaded, please try again later.' },
};

/** OpenAI's error body: {error: {message, type, param, code}}. */
function sendError(
  res: ServerResponse,
  status: number,
  given: { message?: string; code?: string; param?: string; authorization?: string } = {},
): void {
  const kind = errorKinds[status] ?? {
    type: status >= 500 ? 'server_error' : 'invalid_request_error',
    code: null,
    message: `Error ${status}.`,
  };
  let text = given.message ?? kind.message;
  if (status === 401) {
    // Like OpenAI: name only the key's first characters, never the key.
    text = given.authorization?.startsWith('Bearer ')
      ? `Incorrect API key provided: ${given.authorization.slice(7, 10)}***. You can find your API key at https://platform.openai.com/account/api-keys.`
      : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
  }
  if (status === 429) res.setHeader('retry-after', '1');
  const error = { message: text, type: kind.type, param: given.param ?? null, code: given.code ?? kind.code };
  sendJson(res, status, { error });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function modelObject(id: string) {
  return { id, object: 'model', created: 1_700_000_000, owned_by: 'fixture' };
}

async function readText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function messagesText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  return messages
    .map((m) => (typeof m?.content === 'string' ? m.content : JSON.stringify(m?.content ?? '')))
    .join('\n');
}

/** Rough token count (OpenAI's rule of thumb: ~4 characters a token). */
function tokens(textOrLength: string | number): number {
  const length = typeof textOrLength === 'number' ? textOrLength : textOrLength.length;
  return Math.ceil(length / 4);
}
