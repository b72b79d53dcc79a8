/**
 * JSON-RPC answers in the answer phase: a stage that inspects or replaces the upstream's
 * JSON-RPC response uses these instead of reading the answer itself, so that a JSON body and an
 * MCP streamable-HTTP event stream are handled alike, and an answer that is not JSON-RPC is
 * refused (UninspectableAnswer) rather than passed unread.
 */
import { type Answer, answerOf } from '../answer/answer.ts';
import type { SseEvent, SseFilter, SseVerdict } from '../answer/event-stream.ts';
import { UninspectableAnswer } from '../answer/uninspectable.ts';
import { GatewayError } from '../errors.ts';
import type { GatewayContext, JsonRpcId } from '../state.ts';
import { isRpcResponse } from './jsonrpc.ts';

export type RpcMessage = Record<string, unknown>;

/**
 * The answer these helpers read: a stage's own handle (`await next()`, so a stream filter added
 * here runs under that stage's guard and `on_uninspectable`), or the store itself (the default,
 * for a caller without a handle).
 */
export type AnswerView = Pick<
  Answer,
  'hasBody' | 'isEventStream' | 'status' | 'json' | 'readJson' | 'setJson' | 'bytes'
> & {
  filterEvents(filter: SseFilter): void;
};

/** Returns the response to pass on: the same object when unchanged, or a replacement (never change it in place). */
export type RpcResponseMap = (response: RpcMessage, ctx: GatewayContext) => RpcMessage | Promise<RpcMessage>;

/** A request or notification (from the server, on an MCP stream): `jsonrpc: "2.0"` and a method. */
function isRpcMessage(value: unknown): boolean {
  const msg = value as Record<string, unknown> | null;
  return typeof msg === 'object' && msg !== null && msg.jsonrpc === '2.0' && typeof msg.method === 'string';
}

/** A well-formed response (JSON-RPC 2.0 §5): `jsonrpc: "2.0"`, exactly one of result/error, a proper error object. */
function isWellFormed(msg: RpcMessage): boolean {
  if (msg.jsonrpc !== '2.0') return false;
  if ('result' in msg === 'error' in msg) return false;
  if ('error' in msg) {
    const e = msg.error as Record<string, unknown> | null;
    return typeof e === 'object' && e !== null && Number.isInteger(e.code) && typeof e.message === 'string';
  }
  return true;
}

/**
 * Applies `map` to the JSON-RPC response in the request's answer: a JSON body now, each response
 * event of an event stream as it passes. A GatewayError thrown by `map` answers with that error
 * (a JSON body), or replaces the event by a JSON-RPC error (a stream, whose headers are gone).
 */
export function mapRpcResponses(
  ctx: GatewayContext,
  map: RpcResponseMap,
  answer: AnswerView = answerOf(ctx),
): Promise<void> {
  if (!answer.hasBody) return done;
  if (answer.isEventStream) {
    answer.filterEvents(new RpcResponseFilter(ctx, map));
    return done;
  }
  // Chained, no async frames (docs/performance.md, "Work per request").
  return answer.json().then((json) => {
    const body = rpcBody(json, answer.status);
    if (body === undefined) return;
    const out = map(body, ctx);
    if (out instanceof Promise) return out.then((mapped) => replaceChanged(answer, body, mapped));
    replaceChanged(answer, body, out);
  });
}

/** The mapped response becomes the body when it is another object than the one read. */
function replaceChanged(answer: AnswerView, read: RpcMessage, mapped: RpcMessage): void {
  if (mapped !== read) answer.setJson(mapped);
}

/** What mapRpcResponses returns when it has nothing to wait for (one promise for every request). */
const done: Promise<void> = Promise.resolve();

/**
 * Checks that the answer carries a well-formed response to request `id` (a JSON body, or an event
 * of the stream before it ends): anything else is refused as not inspectable. An empty error
 * answer (a transport-level status such as 404 for an unknown session) passes as it is. A promise
 * only when the body is still to be read: an answer another stage parsed already is checked at
 * once (throwing), with no async step (docs/performance.md, "Work per request"); `await` it.
 */
export function expectRpcResponse(
  ctx: GatewayContext,
  id: JsonRpcId,
  answer: AnswerView = answerOf(ctx),
): Promise<void> | undefined {
  if (!answer.hasBody) return;
  if (answer.isEventStream) {
    answer.filterEvents(new ResponseExpected(ctx, id));
    return;
  }
  const parsed = answer.readJson;
  if (parsed !== undefined) {
    isResponseTo(rpcBody(parsed, answer.status), id);
    return;
  }
  return readRpcBody(answer).then((body) => isResponseTo(body, id));
}

/** Throws unless `body` (undefined: an empty error answer, passed) is a well-formed response to `id`. */
function isResponseTo(body: RpcMessage | undefined, id: JsonRpcId): void {
  if (body !== undefined && (!isWellFormed(body) || body.id !== id)) throw notResponse(id);
}

/**
 * The response to the request, from a JSON body or from an event stream read whole (e.g. to unwrap
 * it). A promise only when the body is still to be read (as expectRpcResponse); `await` it.
 */
export function readRpcResponse(
  ctx: GatewayContext,
  answer: AnswerView = answerOf(ctx),
): RpcMessage | undefined | Promise<RpcMessage | undefined> {
  if (!answer.hasBody) return undefined;
  if (answer.isEventStream) return readStreamResponse(answer);
  const parsed = answer.readJson;
  return parsed !== undefined ? rpcBody(parsed, answer.status) : readRpcBody(answer);
}

async function readStreamResponse(answer: AnswerView): Promise<RpcMessage> {
  const text = (await answer.bytes()).toString('utf8');
  for (const block of text.split(/\r\n\r\n|\n\n|\r\r/)) {
    const data = block
      .split(/\r\n|\n|\r/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data === '') continue;
    const msg = parseEvent(data);
    if (isRpcResponse(msg)) return msg;
  }
  throw new UninspectableAnswer('truncated', 'the event stream ended without a JSON-RPC response');
}

function readRpcBody(answer: AnswerView): Promise<RpcMessage | undefined> {
  return answer.json().then((body) => rpcBody(body, answer.status));
}

/** The JSON-RPC response a parsed answer body is; undefined for an empty error answer. */
function rpcBody(body: unknown, status: number): RpcMessage | undefined {
  if (body === undefined && status >= 400) return undefined;
  if (!isRpcResponse(body)) throw new UninspectableAnswer('not_rpc', 'the answer is not a JSON-RPC response');
  return body;
}

function notResponse(id: JsonRpcId): UninspectableAnswer {
  return new UninspectableAnswer(
    'not_rpc',
    `the answer is not a well-formed JSON-RPC response to request ${JSON.stringify(id)}`,
  );
}

/** Parsed event data, shared by the filters of one stream (an unchanged event is the same object). */
const parsedEvents = new WeakMap<SseEvent, unknown>();

function parsedData(event: SseEvent): unknown {
  if (parsedEvents.has(event)) return parsedEvents.get(event);
  const value = parseEvent(event.data);
  parsedEvents.set(event, value);
  return value;
}

function parseEvent(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new UninspectableAnswer('invalid_event', 'an event of the stream is not JSON');
  }
}

/** The events that end a refused stream: the request's JSON-RPC error (the route's dialect writes it). */
function refusal(ctx: GatewayContext, err: UninspectableAnswer): SseEvent[] {
  const id = ctx.state.rpc?.id ?? null;
  const body = ctx.state.dialect ? ctx.state.dialect.render(err, id).body : rpcError(id, err);
  return [{ event: 'message', data: JSON.stringify(body) }];
}

function rpcError(id: JsonRpcId, err: GatewayError): RpcMessage {
  return {
    jsonrpc: '2.0',
    id,
    error: { code: -32603, message: err.message, ...(err.details ? { data: err.details } : {}) },
  };
}

/** `map` on each response event of an MCP stream; notifications and server requests pass untouched. */
class RpcResponseFilter implements SseFilter {
  constructor(
    private readonly ctx: GatewayContext,
    private readonly map: RpcResponseMap,
  ) {}

  onEvent(event: SseEvent): SseVerdict | undefined | Promise<SseVerdict | undefined> {
    if (event.data === '') return undefined;
    const msg = parsedData(event);
    if (!isRpcResponse(msg)) return undefined;
    let out: RpcMessage | Promise<RpcMessage>;
    try {
      out = this.map(msg, this.ctx);
    } catch (err) {
      return this.#failed(event, msg, err);
    }
    if (out instanceof Promise)
      return out.then(
        (o) => this.#replace(event, msg, o),
        (err) => this.#failed(event, msg, err),
      );
    return this.#replace(event, msg, out);
  }

  refuse(err: UninspectableAnswer): SseEvent[] {
    return refusal(this.ctx, err);
  }

  #replace(event: SseEvent, msg: RpcMessage, out: RpcMessage): SseVerdict | undefined {
    if (out === msg) return undefined;
    const replaced = { event: event.event, id: event.id, data: JSON.stringify(out) };
    parsedEvents.set(replaced, out);
    return { events: [replaced] };
  }

  /** A stage refused the response: headers are gone, so the event becomes a JSON-RPC error. */
  #failed(event: SseEvent, msg: RpcMessage, err: unknown): SseVerdict | undefined {
    if (!(err instanceof GatewayError) || err.kind === 'upstream_invalid') throw err;
    const id = (msg.id ?? null) as JsonRpcId;
    const body = this.ctx.state.dialect ? this.ctx.state.dialect.render(err, id).body : rpcError(id, err);
    return this.#replace(event, msg, body as RpcMessage);
  }
}

/** The stream must carry a well-formed response to the request before it ends. */
class ResponseExpected implements SseFilter {
  #answered = false;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly id: JsonRpcId,
  ) {}

  onEvent(event: SseEvent): SseVerdict | undefined {
    if (event.data === '') return undefined;
    const msg = parsedData(event);
    if (isRpcResponse(msg)) {
      if (!isWellFormed(msg) || msg.id !== this.id) throw notResponse(this.id);
      this.#answered = true;
    } else if (!isRpcMessage(msg)) {
      throw new UninspectableAnswer('not_rpc', 'an event of the stream is not a JSON-RPC message');
    }
    return undefined;
  }

  onEnd(): SseEvent[] {
    if (!this.#answered) {
      throw new UninspectableAnswer('truncated', 'the stream ended without the response to the request');
    }
    return [];
  }

  refuse(err: UninspectableAnswer): SseEvent[] {
    // Refused after the response went out (a malformed event after it): nothing more to say.
    return this.#answered ? [] : refusal(this.ctx, err);
  }
}
