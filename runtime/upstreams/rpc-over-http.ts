/**
 * JSON-RPC calls over HTTP, on any `forward` (one endpoint's pool, a balanced upstream, or the
 * active check's own connection): the gateway's own calls of a `jsonrpc` upstream and the
 * `jsonrpc_method` health check. Answers may be application/json or an SSE stream (MCP streamable
 * HTTP); the response with the call's id is picked out. With `protocol: mcp` the caller keeps one
 * MCP session of its own: initialize + notifications/initialized first, `Mcp-Session-Id`
 * afterwards, and a fresh handshake when the server has forgotten the session (404), or when a
 * balanced upstream says the endpoint holding it is out (`session_not_found`). A server that
 * refuses `initialize` with -32022 and lists 2026-07-28 is called statelessly in that revision
 * (`_meta` and `Mcp-Method`/`Mcp-Name` headers on each request; an `input_required` result, which
 * the gateway's own call cannot answer, is an upstream error).
 */
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { JsonRpcRequest } from '../state.ts';
import { bufferedWhole } from '../util/buffered-whole.ts';
import type { ClientAbort } from '../util/client-abort.ts';
import { encodeMcpHeaderValue, mcpNameOf } from '../wire/mcp-headers.ts';
import type { RpcProtocol } from './config.ts';
import { toUpstreamError } from './http-errors.ts';
import { sseData } from './sse.ts';
import type { HttpForwardRequest, HttpForwardResponse, RpcCallOptions } from './types.ts';

type Message = Record<string, unknown>;

export const MCP_PROTOCOL_VERSION = '2025-06-18';
export const clientInfo = { name: 'switchyard', version: '0.1.0' };

interface Session {
  id?: string;
  protocolVersion: string;
  /** A 2026-07-28-only server (initialize refused -32022): no session, each request says its version itself. */
  stateless?: boolean;
}

/** The stateless MCP revision the caller falls back to when a server refuses `initialize`. */
export const MCP_STATELESS_VERSION = '2026-07-28';
const metaKey = 'io.modelcontextprotocol/';

export interface RpcCallerConfig {
  protocol: RpcProtocol;
  /** Default time allowed for one call. */
  timeout_ms: number;
  connect_timeout_ms: number;
  /**
   * The forward keeps the call's deadline itself (HttpUpstreamImpl.forward: `timeoutMs` on a native
   * timer, an aborted caller's signal cancels it, a timeout is `upstream_timeout`): the call then
   * makes no timeout signal of its own. Without it (the active check's one-connection client) the
   * call bounds itself with `AbortSignal.timeout`.
   */
  forwardKeepsDeadline?: boolean;
}

export type Forward = (req: HttpForwardRequest) => Promise<HttpForwardResponse>;

export class RpcOverHttp {
  private nextId = 1;
  private session?: Promise<Session>;

  constructor(
    private readonly name: string,
    private readonly config: RpcCallerConfig,
    private readonly logger: Logger,
    private readonly forward: Forward,
  ) {}

  /** The MCP session id the caller holds now, if any (health output). */
  async sessionId(): Promise<string | undefined> {
    return this.session ? (await this.session.catch(() => undefined))?.id : undefined;
  }

  async call(message: JsonRpcRequest, options: RpcCallOptions = {}): Promise<Message | undefined> {
    if (this.config.protocol !== 'mcp') return this.exchange(message, options);
    const session = await this.ensureSession(options);
    try {
      return await this.exchange(message, options, session);
    } catch (err) {
      if (!(err instanceof SessionExpired)) throw err;
      if (this.session && (await this.session) === session) this.session = undefined;
      return this.exchange(message, options, await this.ensureSession(options));
    }
  }

  /** Ends the MCP session it holds (DELETE, best effort, within `timeoutMs`), so the server need not keep it until it expires. */
  async close(timeoutMs = 1000): Promise<void> {
    const pending = this.session;
    this.session = undefined;
    const session = pending ? await pending.catch(() => undefined) : undefined;
    if (!session?.id) return;
    const headers = { 'mcp-session-id': session.id, 'mcp-protocol-version': session.protocolVersion };
    try {
      const res = await this.forward({
        method: 'DELETE',
        path: '/',
        headers,
        signal: AbortSignal.timeout(timeoutMs),
        timeoutMs,
      });
      if (!res.whole) res.body.resume();
    } catch {
      // Gone already, or not answering: the server's own expiry ends it.
    }
  }

  private ensureSession(options: RpcCallOptions): Promise<Session> {
    if (!this.session) {
      const pending = this.handshake(options);
      this.session = pending;
      pending.catch(() => {
        if (this.session === pending) this.session = undefined;
      });
    }
    return this.session;
  }

  private async handshake(options: RpcCallOptions): Promise<Session> {
    const init: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo },
    };
    const opened: Session = { protocolVersion: MCP_PROTOCOL_VERSION };
    const answer = await this.exchange(init, { timeoutMs: options.timeoutMs }, opened);
    if (speaksOnlyStateless(answer)) {
      this.logger.debug({ upstream: this.name }, 'MCP server speaks only 2026-07-28: stateless calls');
      return { protocolVersion: MCP_STATELESS_VERSION, stateless: true };
    }
    if (!answer || answer.error) {
      throw new GatewayError('upstream_error', 'MCP initialize failed', {
        details: { upstream: this.name, error: answer?.error },
      });
    }
    const result = answer.result as { protocolVersion?: string } | undefined;
    if (result?.protocolVersion) opened.protocolVersion = result.protocolVersion;
    await this.exchange({ jsonrpc: '2.0', method: 'notifications/initialized' }, options, opened);
    this.logger.debug({ session: opened.id }, 'MCP session opened');
    return opened;
  }

  /**
   * One POST. `session` is updated in place with the id the server hands out (initialize).
   * Returns the response message with the caller's id, or undefined for a notification.
   */
  private async exchange(
    message: JsonRpcRequest,
    options: RpcCallOptions,
    session?: Session,
  ): Promise<Message | undefined> {
    const isRequest = message.id !== undefined;
    const wireId = this.nextId++;
    const timeoutMs = options.timeoutMs ?? this.config.timeout_ms;
    // Per call, the lighter way when the forward keeps the deadline: no timeout signal and no
    // composite one (AbortSignal.any holds its sources through WeakRefs the GC must process).
    const timeout = this.config.forwardKeepsDeadline ? undefined : AbortSignal.timeout(timeoutMs);
    const signal =
      timeout && options.signal
        ? AbortSignal.any([abortSignalOf(options.signal), timeout])
        : (timeout ?? options.signal);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...options.headers,
    };
    if (session?.id) headers['mcp-session-id'] = session.id;
    if (session && message.method !== 'initialize') headers['mcp-protocol-version'] = session.protocolVersion;
    const sent = session?.stateless ? statelessRequest(message, headers) : message;
    const body = JSON.stringify(isRequest ? { ...sent, id: wireId } : sent);
    let res: HttpForwardResponse | undefined;
    /** The answer's body when it was taken from the buffer (its end is then already on its way). */
    let whole: Buffer | undefined;
    try {
      res = await this.forward({ method: 'POST', path: '/', headers, body, signal, timeoutMs });
      const sid = res.headers['mcp-session-id'];
      if (session && typeof sid === 'string') session.id = sid;
      if (!isRequest && res.status < 400) return undefined;
      const contentType = String(res.headers['content-type'] ?? '');
      // A small answer came whole (answer-handler.ts), or is in the body's buffer already (no listeners).
      whole = res.whole;
      if (!whole && !contentType.includes('text/event-stream'))
        whole = bufferedWhole(res.body, Number(res.headers['content-length']));
      const answer = await readAnswer(whole ?? res.body, contentType, wireId);
      // The spec says 404 for a forgotten session; some servers answer 400 "No valid session ID".
      if (session?.id && sessionLost(res.status, answer)) throw new SessionExpired();
      if (answer && session?.stateless && inputRequired(answer)) {
        throw new GatewayError('upstream_error', 'The upstream asks for client input (input_required)', {
          details: {
            upstream: this.name,
            reason: "a 2026-07-28 server's multi-round request cannot be answered on the gateway's own call",
          },
        });
      }
      if (answer) return { ...answer, id: message.id };
      throw new GatewayError('upstream_error', `Upstream answered ${res.status} without a JSON-RPC response`, {
        details: { upstream: this.name, status: res.status },
      });
    } catch (err) {
      if (timeout?.aborted && !options.signal?.aborted) {
        throw new GatewayError('upstream_timeout', `Upstream did not answer within ${timeoutMs} ms`, {
          details: { upstream: this.name, timeout_ms: timeoutMs },
        });
      }
      if (err instanceof SessionExpired) throw err;
      // A balanced upstream: the endpoint that held the session is out; a new one goes elsewhere.
      if (session?.id && err instanceof GatewayError && err.code === 'session_not_found') throw new SessionExpired();
      // The answer's body cut short or reset while it was read: an upstream failure (502), never a 500.
      throw toUpstreamError(
        err,
        this.name,
        { connectMs: this.config.connect_timeout_ms, responseMs: timeoutMs },
        signal,
      );
    } finally {
      // Stop an SSE stream that stays open after the answer; destroying it early is not an error.
      if (res && !res.whole && !whole && !res.body.readableEnded) res.body.on('error', () => {}).destroy();
    }
  }
}

class SessionExpired extends Error {}

/** `initialize` refused with -32022 by a server whose supported versions include the stateless revision. */
function speaksOnlyStateless(answer: Message | undefined): boolean {
  const error = answer?.error as { code?: unknown; data?: { supported?: unknown } } | undefined;
  const supported = error?.data?.supported;
  return error?.code === -32022 && Array.isArray(supported) && supported.includes(MCP_STATELESS_VERSION);
}

/**
 * A message as a 2026-07-28 server takes it: its version, the gateway's (empty) capabilities and
 * clientInfo in `params._meta`, mirrored with the method and name in the headers.
 */
function statelessRequest(message: JsonRpcRequest, headers: Record<string, string>): JsonRpcRequest {
  headers['mcp-method'] = message.method;
  const name = mcpNameOf(message.method, message.params);
  if (name !== undefined) headers['mcp-name'] = encodeMcpHeaderValue(name);
  const params =
    message.params !== null && typeof message.params === 'object' && !Array.isArray(message.params)
      ? (message.params as Message)
      : {};
  const meta = params._meta !== null && typeof params._meta === 'object' ? (params._meta as Message) : {};
  return {
    ...message,
    params: {
      ...params,
      _meta: {
        ...meta,
        [`${metaKey}protocolVersion`]: MCP_STATELESS_VERSION,
        [`${metaKey}clientCapabilities`]: {},
        [`${metaKey}clientInfo`]: clientInfo,
      },
    },
  };
}

function inputRequired(answer: Message): boolean {
  const result = answer.result as { resultType?: unknown } | undefined;
  return result?.resultType === 'input_required';
}

/**
 * AbortSignal.any takes AbortSignals only: a caller's ClientAbort is bridged to one (the path of a
 * caller that bounds its calls itself; one endpoint's forward takes the ClientAbort as it is).
 */
function abortSignalOf(signal: AbortSignal | ClientAbort): AbortSignal {
  if (signal instanceof AbortSignal) return signal;
  const bridge = new AbortController();
  if (signal.aborted) bridge.abort();
  else signal.once('abort', () => bridge.abort());
  return bridge.signal;
}

function sessionLost(status: number, answer: Message | undefined): boolean {
  if (status === 404) return true;
  const message = (answer?.error as { message?: unknown } | undefined)?.message;
  return status === 400 && typeof message === 'string' && /session/i.test(message);
}

/**
 * The JSON-RPC response with `wireId` from a JSON or SSE body, if there is one: a stream to read,
 * or the whole JSON body in hand already.
 */
async function readAnswer(body: Readable | Buffer, contentType: string, wireId: number): Promise<Message | undefined> {
  const matches = (m: unknown): m is Message =>
    typeof m === 'object' && m !== null && ('result' in m || 'error' in m) && (m as Message).id === wireId;
  if (!Buffer.isBuffer(body) && contentType.includes('text/event-stream')) {
    for await (const data of sseData(body)) {
      const msg = parseJson(data);
      const found = Array.isArray(msg) ? msg.find(matches) : matches(msg) ? msg : undefined;
      if (found) return found;
    }
    return undefined;
  }
  const msg = parseJson(Buffer.isBuffer(body) ? body.toString('utf8') : await readText(body));
  if (Array.isArray(msg)) return msg.find(matches);
  // A server may answer an error without echoing the id (e.g. a 400 before parsing).
  if (typeof msg === 'object' && msg !== null && ('result' in msg || 'error' in msg)) return msg as Message;
  return undefined;
}

/**
 * A JSON answer's body, whole, with event listeners (cheaper than async iteration, which watches
 * the stream with finished() and makes a promise per chunk). Fails as async iteration would: with
 * the stream's error, or ERR_STREAM_PREMATURE_CLOSE when it closes before its end.
 */
function readText(body: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const settle = (): void => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      body.off('close', onClose);
    };
    const onData = (chunk: Buffer | string): void => {
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    };
    const onEnd = (): void => {
      settle();
      resolve((chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)).toString('utf8'));
    };
    const onError = (err: Error): void => {
      settle();
      reject(err);
    };
    const onClose = (errored?: Error | null): void => {
      settle();
      reject(errored ?? Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    if (body.readableEnded) return resolve('');
    if (body.destroyed) return onClose(body.errored);
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
    body.once('close', onClose);
    body.resume();
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
