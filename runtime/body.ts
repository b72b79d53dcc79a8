/**
 * Reading request bodies once, with limits. The raw bytes are kept on the state so that an
 * unchanged message can be forwarded without re-serialising; the parsed JSON is kept too.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import { GatewayError } from './errors.ts';
import type { GatewayContext } from './state.ts';
import { bufferedWhole } from './util/buffered-whole.ts';

export async function readBody(ctx: GatewayContext): Promise<Buffer> {
  return ctx.state.rawBody ?? takeBufferedBody(ctx) ?? streamedBody(ctx, (raw) => raw);
}

/**
 * Reads the body as it arrives and calls `then` with it. First, when the body may be in the chunk
 * the parser is still working through: a request's stages start from the parser's callback for
 * its headers, before the parser has pushed the body bytes that came in the same chunk, so a small
 * body is not buffered at the first look but is once the parser is done with the chunk, which is
 * before the next microtask runs. One microtask later the buffer is looked at again
 * (takeBufferedBody), and raw-body's listeners are set up only if the body is still not in whole
 * (measured: the typed proxy had read every request's body through raw-body).
 */
function streamedBody<R>(ctx: GatewayContext, then: (raw: Buffer) => R): Promise<Awaited<R>> {
  if (!mayComeWithHeaders(ctx.req)) return bodyAsItArrives(ctx, then);
  return Promise.resolve().then(() => {
    const raw = takeBufferedBody(ctx);
    return raw ? (then(raw) as Awaited<R>) : bodyAsItArrives(ctx, then);
  });
}

/** Bytes a socket read hands the parser at most (libuv's 64 KiB): a longer body cannot have come with its headers. */
const oneReadBytes = 64 * 1024;

/** Whether the declared body is short enough to have come in the chunk of its headers, and is not read yet. */
function mayComeWithHeaders(req: IncomingMessage): boolean {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  return (
    declared > 0 &&
    declared <= oneReadBytes &&
    req.readableLength < declared &&
    !req.readableEnded &&
    req.readableFlowing !== true &&
    req.readableEncoding === null
  );
}

/**
 * Reads the body as it arrives (raw-body: the limit, the declared length, an aborted request),
 * keeps it on the state and calls `then` with it: one promise and one `then`, no async frame.
 */
function bodyAsItArrives<R>(ctx: GatewayContext, then: (raw: Buffer) => R): Promise<Awaited<R>> {
  const limit = ctx.state.limits.bodyBytes;
  const declared = Number(ctx.get('content-length') || Number.NaN);
  return getRawBody(ctx.req, { limit, length: Number.isFinite(declared) ? declared : undefined }).then(
    (raw) => {
      ctx.state.rawBody = raw;
      return then(raw) as Awaited<R>; // a promise `then` returns is adopted: the same for the caller
    },
    (err) => {
      throw readFailure(err, limit);
    },
  );
}

function readFailure(err: unknown, limit: number): GatewayError {
  const e = err as { type?: string; status?: number };
  if (e.type === 'entity.too.large') return tooLarge(limit);
  if (e.type === 'request.aborted') return new GatewayError('bad_request', 'Request aborted by the client');
  return new GatewayError('bad_request', 'Could not read the request body', { cause: err });
}

/**
 * readBody's result when it needs no wait: the body in whole already (it came with the headers, as
 * a small request's does), taken from the request's buffer at once instead of through raw-body's
 * listeners and promise (bufferedWhole: only when its declared length, within the limit, is
 * exactly what is buffered). It refuses a declared length over the limit as readBody does.
 */
function takeBufferedBody(ctx: GatewayContext): Buffer | undefined {
  const limit = ctx.state.limits.bodyBytes;
  const declared = Number(ctx.get('content-length') || Number.NaN);
  if (declared > limit) throw tooLarge(limit);
  const buffered = bufferedWhole(ctx.req, declared);
  if (buffered) ctx.state.rawBody = buffered;
  return buffered;
}

/**
 * A refused body (413) is read and thrown away before the answer goes out, up to this many bytes
 * (the larger of 64 MiB and four times the limit) and this long: a client still sending when the
 * connection closes sees a reset instead of the status (Node clients: EPIPE). Past either bound
 * the connection is closed after the answer.
 */
export const discardBytesFloor = 64 * 1024 * 1024;
export const discardMs = 10_000;

export function discardBound(limit: number): number {
  return Math.max(discardBytesFloor, 4 * limit);
}

/**
 * Requests that asked `Expect: 100-continue` and were not sent the 100 (their body is over the
 * limit): the client sends no body, so nothing is waited for; the answer closes the connection.
 */
export const bodyNotInvited = new WeakSet<IncomingMessage>();

/**
 * Reads what is left of a request body and drops it, up to `maxBytes` and `maxMs`. Resolves true
 * when the body was read to its end (the connection can carry the answer and stay open), false
 * when a bound was passed, the declared length is over `maxBytes`, the body was never invited
 * (see bodyNotInvited), or the client went away.
 */
export function discardBody(req: IncomingMessage, maxBytes: number, timeMs = discardMs): Promise<boolean> {
  if (req.complete || req.readableEnded) return Promise.resolve(true);
  if (bodyNotInvited.has(req)) return Promise.resolve(false);
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (declared > maxBytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = 0;
    const done = (whole: boolean) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      if (!whole) req.pause();
      resolve(whole);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > maxBytes) done(false);
    };
    const onEnd = () => done(true);
    const onClose = () => done(req.complete);
    const timer = setTimeout(() => done(false), timeMs);
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    req.resume();
  });
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError('payload_too_large', `Request body exceeds the limit of ${limit} bytes`, {
    details: { limit_bytes: limit },
  });
}

const jsonType = /^application\/([a-z0-9.+-]*\+)?json$/;

/**
 * A JSON body must say so: `application/json` or `application/<x>+json`. What a cross-site page
 * can send without a preflight (`text/plain`, a form, no type at all) is refused with 415, so that
 * a browser never gets to post JSON to a service on another origin.
 */
export function requireJsonContentType(ctx: GatewayContext): void {
  const type = (ctx.get('Content-Type').split(';')[0] ?? '').trim().toLowerCase();
  if (!jsonType.test(type)) {
    throw new GatewayError(
      'unsupported_media_type',
      type === ''
        ? 'Content-Type must be application/json, got none'
        : `Content-Type must be application/json, got "${type}"`,
    );
  }
}

/**
 * Parses the body as JSON (refusing a body not declared as JSON, see requireJsonContentType). Malformed JSON, non-UTF-8 bytes and nesting deeper than the limit are
 * `parse_error` / `bad_request` GatewayErrors, never crashes.
 */
export function readJson(ctx: GatewayContext): Promise<unknown> {
  try {
    // Promise.resolve of the promise withJson returns is that promise: nothing more per read.
    return Promise.resolve(withJson(ctx, same));
  } catch (err) {
    return Promise.reject(err);
  }
}

const same = <T>(value: T): T => value;

/**
 * Calls `use` with the parsed JSON body (readJson's checks and errors): at once when it is at hand
 * (parsed before, or the whole body came with the headers), else once the body is read, and
 * returns what `use` returns (or a promise of it). When the body is at hand, a refused body is
 * thrown, not rejected: call it from a stage wrapped in `syncStage`, or `await` it. What it saves
 * against `await readJson(ctx)` in an async stage: the async frames and their promises, on every
 * request (docs/performance.md, "Work per request").
 */
export function withJson<R>(ctx: GatewayContext, use: (body: unknown) => R): R | Promise<Awaited<R>> {
  if (ctx.state.json !== undefined) return use(ctx.state.json);
  requireJsonContentType(ctx);
  // A body in whole already is read without a wait (readBody's limit check first: it may throw).
  const raw = ctx.state.rawBody ?? takeBufferedBody(ctx);
  if (raw) return use(parseJson(ctx, raw));
  return streamedBody(ctx, (read) => use(parseJson(ctx, read)));
}

/** The body's bytes as JSON, kept on the state (ctx.state.json); readJson's errors. */
function parseJson(ctx: GatewayContext, raw: Buffer): unknown {
  if (!isUtf8(raw)) throw new GatewayError('parse_error', 'Request body is not valid UTF-8');
  const text = raw.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    if (text.trim() === '') throw new GatewayError('parse_error', 'Request body is empty');
    throw new GatewayError('parse_error', `Request body is not valid JSON: ${(err as Error).message}`);
  }
  const depth = jsonDepth(value, ctx.state.limits.jsonDepth);
  if (depth > ctx.state.limits.jsonDepth) {
    throw new GatewayError('bad_request', `JSON nesting exceeds the limit of ${ctx.state.limits.jsonDepth} levels`, {
      details: { limit_depth: ctx.state.limits.jsonDepth },
    });
  }
  ctx.state.json = value;
  return value;
}

/** Depth of a JSON value, computed iteratively; stops counting once past `cap`. */
export function jsonDepth(value: unknown, cap = Number.POSITIVE_INFINITY): number {
  if (value === null || typeof value !== 'object') return 0;
  let max = 0;
  // Two parallel stacks (values and their depths): no per-node allocation.
  const values: object[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop() as Record<string, unknown>;
    const d = depths.pop() as number;
    if (d > max) {
      max = d;
      if (max > cap) return max;
    }
    const children = Array.isArray(v) ? v : Object.values(v);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (child !== null && typeof child === 'object') {
        values.push(child);
        depths.push(d + 1);
      }
    }
  }
  return max;
}

/** Reads the body as a JSON object (not array/scalar); anything else is `bad_request`. */
export function readJsonObject(ctx: GatewayContext): Promise<Record<string, unknown>> {
  try {
    return Promise.resolve(withJsonObject(ctx, same<Record<string, unknown>>));
  } catch (err) {
    return Promise.reject(err);
  }
}

/** withJson for a body that must be a JSON object (readJsonObject's error otherwise). */
export function withJsonObject<R>(
  ctx: GatewayContext,
  use: (body: Record<string, unknown>) => R,
): R | Promise<Awaited<R>> {
  return withJson(ctx, (value) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new GatewayError('bad_request', 'Request body must be a JSON object');
    }
    return use(value as Record<string, unknown>);
  });
}
