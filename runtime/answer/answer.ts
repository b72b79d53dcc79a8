/**
 * The answer phase of the stage contract. The terminal stage leaves a typed answer on
 * `ctx.state.answer` (status, the upstream's headers, and a body that is JSON, bytes, or a stream
 * of events), and each stage may inspect, transform or replace it after `await next()`, in reverse
 * pipeline order (the Koa onion; Envoy's encode path). The runtime writes it once every stage is
 * done (runtime/server/handler.ts), so an answer-phase stage can still refuse it with a thrown
 * error, rendered in the route's dialect like any other.
 *
 * The body is read only when a stage asks: `json()` reads it whole (decoded, bounded by
 * `limits.answer_bytes`) and parses it once; `filterEvents` checks an event stream as it passes
 * (nothing waits for its end). What cannot be read throws an UninspectableAnswer, and the stage's
 * `on_uninspectable` decides (runtime/answer/guard.ts). An answer no stage reads is written as it
 * came, streamed, at no cost.
 */
import { PassThrough, Readable } from 'node:stream';
import { GatewayError } from '../errors.ts';
import type { GatewayContext } from '../state.ts';
import { bufferedWhole } from '../util/buffered-whole.ts';
import type { ClientAbort } from '../util/client-abort.ts';
import { OpenAIStreamFilter, type OpenAIStreamOptions, type OpenAIStreamReader } from '../wire/openai-stream.ts';
import { checkDecodable, decodeBody, decodingStream, encodingsOf } from './decode.ts';
import { type SseFilter, SseFilterTransform } from './event-stream.ts';
import type { AnswerGuard } from './guard.ts';
import { UninspectableAnswer } from './uninspectable.ts';

export type HeaderValue = string | string[];

export interface AnswerInit {
  status: number;
  /** Response headers (hop-by-hop ones already removed); the stages' own headers win over them. */
  headers?: Record<string, HeaderValue | undefined>;
  /** The body as received: whole bytes, a stream still to read, or none. */
  body?: Buffer | Readable | null;
  /**
   * The headers' names are lower case and no value is undefined (as `upstreamResponseHeaders`
   * leaves them): the object is adopted rather than copied, a copy per request saved.
   */
  headersNormalised?: boolean;
  /**
   * A streamed body read whole by a stage must be in within this time (the upstream's response
   * timeout), else the read fails 504 `upstream_timeout`: a stalled upstream never holds the
   * request (and its `max_concurrent` slot) longer.
   */
  readTimeout?: ReadTimeout;
  /** The client's signal (ClientAbort): when the client goes away, a streamed body is released. */
  cancel?: ClientAbort;
}

const noBodyStatus = new Set([204, 205, 304]);
const jsonType = /^(application\/([\w.+-]+\+)?json|text\/json)$/;

export class Answer {
  status: number;
  readonly headers: Record<string, HeaderValue>;
  #trailers?: Array<[string, () => string | undefined]>;
  /** Run once when the body has been handed on whole (true) or will not be (false). */
  #endHooks?: Array<(complete: boolean) => void>;
  /** The response status when the answer was made: a stage that sets `ctx.status` later changes it. */
  readonly #statusAtStart: number;
  #stream: Readable | undefined;
  #bytes: Buffer | undefined;
  /** Content codings still applied to the body (undone by the first whole read). */
  #encodings: string[];
  #decoded = false;
  #json: unknown;
  #parsed = false;
  /** The JSON was set by a stage (or came as a value): serialised when written. */
  #replaced = false;
  #filters: SseFilter[] | undefined;
  /**
   * Filters added without a stage's guard (through `answerOf(ctx)` rather than the stage's own
   * handle): the composer binds them to the stage whose answer phase added them when it returns.
   */
  #unbound: number[] | undefined;
  /** Made from what a terminal stage wrote on ctx (`ctx.body`): left there unless changed. */
  #inContext = false;
  /** `ctx.body` when it was made (the adapter knows a later stage's new `ctx.body` by it). */
  readonly #contextBody: unknown;
  /** The upstream cut the body short before it could be read whole. */
  #broken: Error | undefined;
  #written = false;
  #readTimeout: ReadTimeout | undefined;
  /** The client went away and the streamed body was released. */
  #cancelled = false;

  constructor(
    private readonly ctx: GatewayContext,
    init: AnswerInit,
  ) {
    this.status = init.status;
    this.#statusAtStart = ctx.res.statusCode;
    this.#contextBody = ctx.body;
    if (init.headersNormalised && init.headers) this.headers = init.headers as Record<string, HeaderValue>;
    else {
      this.headers = {};
      for (const name in init.headers) {
        const value = init.headers[name];
        if (value !== undefined) this.headers[name.toLowerCase()] = value;
      }
    }
    const body = init.body ?? null;
    if (body instanceof Readable) {
      this.#stream = body;
      this.#readTimeout = init.readTimeout;
      if (init.cancel) this.#releaseOnAbort(init.cancel, body);
    } else if (body !== null) this.#bytes = body;
    this.#encodings = encodingsOf(this.headers['content-encoding']);
  }

  #releaseOnAbort(cancel: ClientAbort, body: Readable): void {
    const onAbort = (): void => {
      this.#cancelled = true;
      release(body);
    };
    if (cancel.aborted) {
      onAbort();
      return;
    }
    cancel.once('abort', onAbort);
    body.once('close', () => cancel.off('abort', onAbort));
  }

  /**
   * An answer whose body the upstream cut short (it closed the connection before the end): a
   * stage that reads it gets UninspectableAnswer `truncated`, and it is never written as a
   * success (502 `upstream_error`).
   */
  static broken(ctx: GatewayContext, init: Omit<AnswerInit, 'body'>, cause: Error): Answer {
    const answer = new Answer(ctx, init);
    answer.#broken = cause;
    return answer;
  }

  /** An answer that is a JSON value already (an RPC upstream's response message). */
  static fromJson(ctx: GatewayContext, value: unknown, status = 200): Answer {
    const answer = new Answer(ctx, { status, headers: { 'content-type': 'application/json' } });
    answer.#json = value;
    answer.#parsed = true;
    answer.#replaced = true;
    return answer;
  }

  /** The answer a terminal stage wrote the Koa way (`ctx.status`, `ctx.body`), for answer-phase readers. */
  static fromContext(ctx: GatewayContext): Answer {
    const body: unknown = ctx.body;
    const answer = new Answer(ctx, { status: ctx.status });
    answer.#inContext = true;
    answer.headers['content-type'] = ctx.response.get('content-type');
    const encoding = ctx.response.get('content-encoding');
    if (encoding) {
      answer.headers['content-encoding'] = encoding;
      answer.#encodings = encodingsOf(encoding);
    }
    if (body instanceof Readable) answer.#stream = body;
    else if (Buffer.isBuffer(body)) answer.#bytes = body;
    else if (typeof body === 'string') answer.#bytes = Buffer.from(body);
    else if (body !== null && body !== undefined) {
      answer.#json = body;
      answer.#parsed = true;
    }
    return answer;
  }

  /** The media type, lower case, without parameters ('' when there is none). */
  get contentType(): string {
    const raw = this.headers['content-type'];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (!value) return '';
    const semi = value.indexOf(';');
    return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase();
  }

  get isEventStream(): boolean {
    return this.contentType === 'text/event-stream';
  }

  /** False when there is certainly nothing to read: no body, a bodiless status, `Content-Length: 0`. */
  get hasBody(): boolean {
    if (noBodyStatus.has(this.status)) return false;
    if (this.#broken) return true;
    if (this.#parsed) return this.#json !== undefined;
    if (this.#bytes) return this.#bytes.length > 0;
    if (!this.#stream) return false;
    return this.headers['content-length'] !== '0';
  }

  /** Whether stages added stream filters (the audit stage then watches the stream too). */
  get filtered(): boolean {
    return this.#filters !== undefined;
  }

  /**
   * The whole body, decoded, read once. Throws UninspectableAnswer when it is larger than
   * `limits.answer_bytes` or cannot be decoded, GatewayError `upstream_error` when the upstream
   * cut it short.
   */
  bytes(): Promise<Buffer> {
    try {
      // Promise.resolve of the promise #bytesNow returns is that promise: nothing more per read.
      return Promise.resolve(this.#bytesNow());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * bytes() at once when the body is held already (and needs no decoding), else a promise: one
   * `then` on the stream's read, no async frames (docs/performance.md, "Work per request").
   */
  #bytesNow(): Buffer | Promise<Buffer> {
    if (this.#broken) throw truncated(this.#broken);
    if (this.#bytes === undefined) {
      if (this.#stream) {
        const stream = this.#stream;
        this.#stream = undefined;
        return readWhole(stream, this.#limit, this.#readTimeout).then(
          (read) => {
            this.#bytes = read;
            return this.#decodedBytes(read);
          },
          (err) => {
            throw this.#readFailure(err);
          },
        );
      }
      this.#bytes = this.#parsed ? Buffer.from(JSON.stringify(this.#json) ?? '') : Buffer.alloc(0);
    }
    return this.#decodedBytes(this.#bytes);
  }

  /** The body decoded (once) and within the limit. */
  #decodedBytes(bytes: Buffer): Buffer | Promise<Buffer> {
    if (this.#encodings.length > 0 && !this.#decoded) {
      return decodeBody(bytes, this.#encodings, this.#limit).then((decoded) => {
        this.#bytes = decoded;
        this.#decoded = true;
        return this.#withinLimit(decoded);
      });
    }
    return this.#withinLimit(bytes);
  }

  #withinLimit(bytes: Buffer): Buffer {
    if (bytes.length > this.#limit) {
      throw new UninspectableAnswer('too_large', `the answer is larger than ${this.#limit} bytes`);
    }
    return bytes;
  }

  /** Why reading the upstream's stream failed, as the answer's error. */
  #readFailure(err: unknown): unknown {
    // Neither is the answer's fault to pass or refuse: the client left, or the body never came.
    if (this.#cancelled) return new GatewayError('bad_request', 'Request aborted by the client', { cause: err });
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof GatewayError && cause.kind === 'upstream_timeout') return cause;
    return err;
  }

  /** The JSON body if it was read (or set) already, else undefined: never reads it. */
  get readJson(): unknown {
    return this.#parsed ? this.#json : undefined;
  }

  /**
   * The body parsed as JSON, read and parsed once; `undefined` for an empty body. Throws
   * UninspectableAnswer when the content type is not JSON or the body does not parse (a cut-short
   * answer included).
   */
  json(): Promise<unknown> {
    try {
      return Promise.resolve(this.#jsonNow());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** json() at once when the body is held already, else a promise (as #bytesNow). */
  #jsonNow(): unknown {
    if (this.#parsed) return this.#json;
    const type = this.contentType;
    if (!jsonType.test(type)) {
      throw new UninspectableAnswer('content_type', `content type "${type || 'none'}" is not JSON`);
    }
    const bytes = this.#bytesNow();
    return bytes instanceof Promise ? bytes.then((read) => this.#parse(read)) : this.#parse(bytes);
  }

  #parse(bytes: Buffer): unknown {
    if (bytes.length === 0) return undefined;
    try {
      this.#json = JSON.parse(bytes.toString('utf8'));
    } catch (err) {
      throw new UninspectableAnswer('invalid_json', `the body is not valid JSON (${(err as Error).message})`);
    }
    this.#parsed = true;
    return this.#json;
  }

  /** Replaces the body with a JSON value (serialised when written; never change a read value in place). */
  setJson(value: unknown): void {
    this.#json = value;
    this.#parsed = true;
    this.#replaced = true;
    if (!jsonType.test(this.contentType)) this.headers['content-type'] = 'application/json';
  }

  /**
   * Checks an event stream (`text/event-stream`) event by event as it passes, after the filters
   * added before (stages deeper in the pipeline). The filter runs under the `on_uninspectable` of
   * the stage adding it: `guard` (a stage's handle passes its own), else the stage whose answer
   * phase added it, bound when that stage returns (`bindFilters`). Throws UninspectableAnswer for
   * a stream in an encoding that cannot be decoded.
   */
  filterEvents(filter: SseFilter, guard?: AnswerGuard): void {
    checkDecodable(this.#encodings);
    this.#filters ??= [];
    if (guard) this.#filters.push(guard.guard(this.ctx, filter));
    else {
      this.#unbound ??= [];
      this.#unbound.push(this.#filters.length);
      this.#filters.push(filter);
    }
  }

  /**
   * Binds the filters added without a guard to `guard` (the composer does, when the stage whose
   * answer phase added them returns).
   */
  bindFilters(guard: AnswerGuard): void {
    const unbound = this.#unbound;
    if (!unbound) return;
    this.#unbound = undefined;
    const filters = this.#filters as SseFilter[];
    for (const i of unbound) filters[i] = guard.guard(this.ctx, filters[i] as SseFilter);
  }

  /** Whether `body` was on ctx when this answer was made (else a stage wrote it since, the Koa way). */
  madeFrom(body: unknown): boolean {
    return body === this.#contextBody;
  }

  /**
   * Reads an OpenAI-style event stream as parsed chunks (runtime/wire/openai-stream.ts): the
   * framing, the JSON of each event (parsed once for every reader), `[DONE]` and events that are
   * not chunks are the runtime's. Runs as a stream filter of the stage adding it.
   */
  filterOpenAIChunks(reader: OpenAIStreamReader, options?: OpenAIStreamOptions, guard?: AnswerGuard): void {
    this.filterEvents(new OpenAIStreamFilter(reader, options), guard);
  }

  /**
   * Sends `name` with a value known only once the body has passed (a count, what a check of the
   * stream decided): for a streamed body, an HTTP trailer read when the stream ends (`Trailer: name`
   * announced with the headers; HTTP/1.1 chunked only, nothing is announced otherwise, and an error
   * answered before the first byte drops the announcement); for a body written whole, a header
   * read when it is written. A value of undefined is left out.
   */
  trailer(name: string, value: () => string | undefined): void {
    this.#trailers ??= [];
    this.#trailers.push([name, value]);
  }

  /**
   * Runs `hook` once the body has been handed on: `complete` is true when all of it went out (a
   * stream to its end, a whole body written), false when it will not (the client left, the
   * upstream failed, an error replaced the answer). Runs before the trailers are read.
   */
  onEnd(hook: (complete: boolean) => void): void {
    this.#endHooks ??= [];
    this.#endHooks.push(hook);
  }

  #ended(complete: boolean): void {
    const hooks = this.#endHooks;
    if (!hooks) return;
    this.#endHooks = undefined;
    for (const hook of hooks) hook(complete);
  }

  /** An answer that will not be written (an error replaced it): releases the upstream's body. */
  discard(): void {
    this.#written = true;
    if (this.#stream) release(this.#stream);
    this.#ended(false);
  }

  /** Writes the answer on the response (the runtime calls it once every stage is done). */
  write(ctx: GatewayContext): void {
    if (this.#written) return;
    this.#written = true;
    if (this.#broken) {
      throw new GatewayError('upstream_error', 'The upstream closed its answer before it was complete', {
        cause: this.#broken,
      });
    }
    // A stage that set `ctx.status` after `next()` decides the status, as with any answer.
    if (ctx.res.statusCode !== this.#statusAtStart && !this.#inContext) this.status = ctx.res.statusCode;
    const watched = this.#endHooks !== undefined || this.#trailers !== undefined;
    if (this.#inContext && !this.#replaced && !this.#filters && !this.#decoded && !watched) return;
    ctx.status = this.status;
    if (this.#decoded) ctx.remove('content-encoding');
    const changedLength = this.#replaced || this.#decoded || this.#filters !== undefined;
    const res = ctx.res;
    for (const name in this.headers) {
      if (res.hasHeader(name)) continue; // what a stage set wins
      if (changedLength && name === 'content-length') continue;
      if (this.#decoded && name === 'content-encoding') continue;
      res.setHeader(name, this.headers[name]); // names and values as received (Koa's set would re-check them)
    }
    if (noBodyStatus.has(this.status)) {
      this.discard();
      ctx.body = null;
      return;
    }
    if (this.#replaced) {
      this.#wholeBody(ctx, Buffer.from(JSON.stringify(this.#json) ?? 'null'));
      return;
    }
    if (this.#bytes !== undefined && !this.#filters) {
      this.#wholeBody(ctx, this.#bytes);
      return;
    }
    const source = this.#stream ?? (this.#bytes ? Readable.from([this.#bytes]) : undefined);
    if (!source) {
      this.#wholeBody(ctx, null);
      return;
    }
    if (this.isEventStream) streamEvents(ctx);
    if (!this.#filters && !watched) {
      ctx.body = source;
      return;
    }
    const body = this.#filters ? this.#filteredEvents(ctx, source, this.#filters) : watchedStream(source);
    this.#watchEnd(ctx, body);
    ctx.body = body;
  }

  /** A body written whole: its end is now, and its trailers go as headers. */
  #wholeBody(ctx: GatewayContext, body: Buffer | null): void {
    ctx.body = body;
    // Koa turns a null body into a 204: the answer's status (a 202 with no body) stands.
    if (body === null) ctx.status = this.status;
    this.#ended(true);
    if (!this.#trailers) return;
    for (const [name, value] of this.#trailers) {
      const v = value();
      if (v !== undefined) ctx.set(name, v);
    }
  }

  /** The end hooks and trailers of a streamed body, when it ends (or does not). */
  #watchEnd(ctx: GatewayContext, body: Readable): void {
    const trailers = this.#trailers && ctx.req.httpVersion === '1.1' ? this.#trailers : undefined;
    if (trailers) ctx.set('Trailer', trailers.map(([name]) => name).join(', '));
    if (!trailers && !this.#endHooks) return;
    // Before pipe's own `end` listener ends the response (listeners run in order).
    body.once('end', () => {
      this.#ended(true);
      if (!trailers) return;
      const values: Record<string, string> = {};
      for (const [name, value] of trailers) {
        const v = value();
        if (v !== undefined) values[name] = v;
      }
      // Gone when an error was answered before the first byte (runtime/server/stream-body.ts).
      if (!ctx.res.writableEnded && ctx.res.hasHeader('trailer')) ctx.res.addTrailers(values);
    });
    body.once('close', () => this.#ended(false));
  }

  #filteredEvents(ctx: GatewayContext, source: Readable, filters: SseFilter[]): Readable {
    const encoded = this.#bytes === undefined && this.#encodings.length > 0;
    if (encoded) ctx.remove('content-encoding');
    const events = encoded ? decodingStream(source, this.#encodings) : source;
    const transform = new SseFilterTransform(
      filters,
      () => {
        events.unpipe(transform);
        release(source);
      },
      this.#limit,
    );
    events.once('error', (err) => transform.destroy(err));
    // The client went away (Koa destroys the body): cancel the upstream request too.
    transform.once('close', () => release(source));
    return events.pipe(transform);
  }

  get #limit(): number {
    return this.ctx.state.limits.answerBytes;
  }
}

/** Writes the request's answer, if a stage left one (the request core, once the pipeline is done). */
export function commitAnswer(ctx: GatewayContext): void {
  ctx.state.answer?.write(ctx);
}

/** Drops the request's answer unwritten (an error answers instead), releasing the upstream's body. */
export function discardAnswer(ctx: GatewayContext): void {
  ctx.state.answer?.discard();
}

/** How a terminal stage's answer goes out (see `respond`). */
export interface RespondInit {
  /** Default 200 (204 for a `null` body). */
  status?: number;
  /** The content type; by default JSON for a value, `text/plain; charset=utf-8` for a string, else bytes. */
  type?: string;
  /** Response headers of the answer (a header a stage sets with `ctx.set` wins over them). */
  headers?: Record<string, HeaderValue>;
}

/**
 * A terminal stage answers: `body` becomes the request's answer, in the answer store the stages
 * before it read (their `await next()` handles). A plain value is JSON (serialised when written); a
 * string is text, a Buffer bytes, a Readable a stream; `null` no body. An answer already there (a
 * stage answering in place of another) is released.
 */
export function respond(ctx: GatewayContext, body: unknown, init: RespondInit = {}): Answer {
  const status = init.status ?? (body === null ? 204 : 200);
  let answer: Answer;
  if (body === null || typeof body === 'string' || Buffer.isBuffer(body) || body instanceof Readable) {
    const type = init.type ?? (typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream');
    // Copied, not spread with the type added: a spread that adds a key gives every object a hidden
    // class of its own in Node 20 (docs/architecture.md, "Process tuning").
    const headers: Record<string, HeaderValue> = Object.assign({}, init.headers);
    if (body !== null) headers['content-type'] = type;
    answer = new Answer(ctx, { status, headers, body: typeof body === 'string' ? Buffer.from(body) : body });
  } else {
    answer = Answer.fromJson(ctx, body, status);
    for (const name in init.headers) {
      const value = init.headers[name];
      if (value !== undefined) answer.headers[name.toLowerCase()] = value;
    }
    answer.headers['content-type'] = init.type ?? 'application/json; charset=utf-8';
  }
  ctx.state.answer?.discard();
  ctx.state.answer = answer;
  return answer;
}

/**
 * The request's answer store, for code that has no stage handle (the runtime's JSON-RPC readers,
 * stages not yet moved to `const answer = await next()`): a stream filter added through it is
 * bound to the stage whose answer phase added it when that stage returns (the composer does it).
 * Outside the composer (a test calling a stage with a `next` of its own), the adapter makes the
 * answer from what was written on ctx.
 */
export function answerOf(ctx: GatewayContext): Answer {
  return ctx.state.answer ?? adoptContextAnswer(ctx);
}

/**
 * The adapter for stages written the Koa way (`ctx.status`, `ctx.body`): what such a stage wrote
 * becomes the request's answer, so the stages before it read it through the one answer store.
 * The composer runs it when each stage returns: with no answer yet, one is made from ctx; a
 * `ctx.body` other than the one the answer was made from (a stage set it after `next()`) replaces
 * the answer (the replaced one is released). The only place the runtime reads `ctx.body` as an
 * answer.
 */
export function adoptContextAnswer(ctx: GatewayContext): Answer {
  const answer = ctx.state.answer;
  if (answer !== undefined) {
    const body: unknown = ctx.body;
    if (body === undefined || answer.madeFrom(body)) return answer;
    answer.discard();
  }
  const made = Answer.fromContext(ctx);
  ctx.state.answer = made;
  return made;
}

/** A stream whose end the answer watches (for its end hooks and trailers); errors and destruction pass both ways. */
function watchedStream(source: Readable): Readable {
  const out = new PassThrough();
  source.once('error', (err) => out.destroy(err));
  out.once('close', () => release(source));
  return source.pipe(out);
}

/** Cancels an upstream body nobody reads any more (undici reports that as an error: expected here). */
function release(stream: Readable): void {
  if (stream.destroyed) return;
  stream.on('error', () => {});
  stream.destroy();
}

/** SSE must reach the client event by event: no socket timeout, no Nagle, no buffering. */
function streamEvents(ctx: GatewayContext): void {
  // ctx.req.socket is gone once the request body was consumed; the response holds the socket.
  const socket = ctx.res.socket ?? ctx.req.socket;
  socket?.setTimeout(0);
  socket?.setNoDelay(true);
  (ctx as { compress?: boolean }).compress = false;
  ctx.set('X-Accel-Buffering', 'no');
}

/**
 * Reads a stream whole, refusing more than `limit` bytes (event listeners: cheaper than async
 * iteration). A stream that fails or is destroyed before its end is UninspectableAnswer
 * `truncated`; one that is not whole within `timeout` is destroyed with its error (the cause of
 * the `truncated`). The stream may have been paused explicitly (the first-byte wait of a provider
 * list does): it is resumed here, as a `data` listener alone would not. `declaredLength` (an
 * answer's Content-Length, which the HTTP client holds it to): when that many bytes are in the
 * stream's buffer already, they are the answer, taken without listeners (bufferedWhole).
 */
export function readWhole(
  stream: Readable,
  limit: number,
  timeout?: ReadTimeout,
  declaredLength?: number,
): Promise<Buffer> {
  const buffered =
    declaredLength !== undefined && declaredLength <= limit ? bufferedWhole(stream, declaredLength) : undefined;
  if (buffered) return Promise.resolve(buffered);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = timeout ? setTimeout(() => stream.destroy(timeout.error()), timeout.ms) : undefined;
    const settle = (): void => {
      clearTimeout(timer);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        settle();
        stream.on('error', () => {});
        stream.destroy();
        reject(new UninspectableAnswer('too_large', `the answer is larger than ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      settle();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    };
    const onError = (err: Error): void => {
      settle();
      reject(truncated(err));
    };
    // Destroyed without an error (the client went away and the answer was released): cut short.
    const onClose = (): void => {
      settle();
      reject(truncated(new Error('the answer was released before it was read whole')));
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
    stream.once('close', onClose);
    stream.resume();
  });
}

/** A bound on the time a whole read may take, and the error it fails with (an upstream_timeout). */
export interface ReadTimeout {
  ms: number;
  error(): Error;
}

function truncated(cause: Error): UninspectableAnswer {
  return new UninspectableAnswer('truncated', 'the upstream closed its answer before it was complete', { cause });
}
