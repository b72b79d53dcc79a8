/**
 * A modern MCP client (2026-07-28: stateless, its version and capabilities in each request's
 * `_meta`) in front of a legacy RPC upstream (an MCP server over HTTP: era-2026-http.ts) that keeps sessions (a stdio MCP server of the 2025
 * revisions, the shipped reference server included). The gateway speaks the legacy protocol to the
 * upstream on the client's behalf:
 *
 * - It holds one upstream session per client — the authenticated subject, else the client's
 *   address (runtime/session-owner.ts: the same key the session share is counted by) — opened
 *   with its own `initialize` at the client's first request and opened again when it ends (idle,
 *   evicted, its child gone). Sessions are never shared between subjects: with authentication a
 *   subject's session is found with that subject only. Without authentication nothing but the
 *   address tells modern clients apart (the revision has no session id): clients behind one
 *   address share one upstream session then.
 * - `server/discover` is answered from the upstream's `initialize` answer (its capabilities less
 *   what cannot be mapped: list-changed and resource subscriptions, logging, tasks); every other
 *   request goes to the session with the modern `_meta` keys taken out, and its answer comes back
 *   in the modern shape: `resultType: "complete"`, `ttlMs: 0` and `cacheScope: "private"` on the
 *   cacheable results (the session is the client's: nothing is for a shared cache), the upstream's
 *   `serverInfo` in `_meta`, and resource-not-found -32002 renumbered -32602.
 * - Progress: a request with a `progressToken` whose client accepts an event stream is answered
 *   with one: the server's `notifications/progress` for the call (its token made unique on the
 *   child's wire and put back) as they come, then the response. Without either, one JSON object.
 * - Cancellation is the transport's: the client closing its request ends the upstream call (the
 *   upstream is sent `notifications/cancelled`). A client's `notifications/cancelled` over HTTP is
 *   accepted and not forwarded (the revision uses it on stdio only; over a shared session it could
 *   name another client's request id).
 * - Multi-round requests: the held session declares elicitation and sampling. A server request
 *   made while the session's one call in flight is a modern tools/call, prompts/get or
 *   resources/read is answered to the client as an `input_required` result (the request in
 *   `inputRequests`, an opaque `requestState`), the upstream call kept waiting; the client's retry
 *   with that requestState (same client, subject and method) and its `inputResponses` answers the
 *   server's request and the call goes on to its result or its next round. A request whose `_meta`
 *   capabilities lack what the server asked for is -32021 with `requiredCapabilities` (the server's
 *   request refused, the call cancelled); a round not answered within a minute is given up the
 *   same way; an unknown, used or another client's requestState is -32602.
 * - `subscriptions/listen` (per-client sessions, whose server's notifications are the client's
 *   own): an event stream of the held session's list changes the client opted in to and the
 *   updates of the resources it names (resources/subscribe upstream, unsubscribed when it leaves),
 *   led by notifications/subscriptions/acknowledged with what is honored.
 * - What cannot be mapped is a clear error, never a hang: `subscriptions/listen` over a shared
 *   child is -32601; a
 *   server request of another kind (roots, or one the gateway cannot attribute to a call) gets
 *   method-not-found from the gateway and the server answers the call with its own error.
 */
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import {
  Answer,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type RpcSessions,
  type RpcUpstream,
  respond,
  type ServerMessageListener,
  type SessionOwner,
  sessionOwner,
} from '../../runtime/index.ts';

export const modernVersion = '2026-07-28';
/** The legacy version the gateway asks the upstream for (the upstream may answer an older one). */
export const legacyVersion = '2025-11-25';
const meta = 'io.modelcontextprotocol/';
const serverInfoKey = `${meta}serverInfo`;
/** Results the revision makes cacheable (CacheableResult: ttlMs and cacheScope required). */
const cacheable = new Set([
  'tools/list',
  'prompts/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
]);
/**
 * The client capabilities the held session declares: the server's requests these allow are
 * carried to the modern client as `input_required` rounds (or -32021 when its request's
 * capabilities lack them).
 */
const heldCapabilities = { elicitation: { form: {}, url: {} }, sampling: {} };
/** Results that may be `input_required` in the revision (multi-round requests). */
const multiRound = new Set(['tools/call', 'prompts/get', 'resources/read']);
/** How long a round's server request waits for the client's retry before the call is given up. */
const inputWaitMs = 60_000;
/** Rounds parked at once per upstream (the oldest is given up past it): the table stays bounded. */
const maxParked = 1024;
/** Versions the gateway speaks to a modern client in front of a legacy upstream, newest first. */
const supported = [modernVersion, '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

/** The protocol version a request's `_meta` names, undefined for a legacy message. */
export function modernVersionOf(rpc: JsonRpcRequest | undefined): unknown {
  const params = rpc?.params;
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return undefined;
  const m = (params as Record<string, unknown>)._meta;
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return undefined;
  return (m as Record<string, unknown>)[`${meta}protocolVersion`];
}

/** A legacy session the gateway holds for a client. */
export interface Held {
  id: string;
  subject?: string;
  /** The upstream's initialize result. */
  init: Record<string, unknown>;
  /** The server forgot it (an HTTP server's 404): opened again at the next request. */
  gone?: boolean;
}

export interface LegacyCallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  trace?: GatewayContext['state']['trace'];
  requestId?: string;
  /** The call's progress and the server's requests made for it (see RpcCallOptions.onServerMessage). */
  onServerMessage?: ServerMessageListener;
}

/**
 * How the mapping reaches a legacy server: a stdio child's session (StdioLegacy, here) or an MCP
 * server's session over streamable HTTP (era-2026-http.ts). The mapping itself (HeldSessions,
 * proxyModern) is one for both.
 */
export interface LegacyTransport {
  readonly name: string;
  /** subscriptions/listen maps onto the sessions (a session's server notifications are its client's own). */
  readonly canListen: boolean;
  /** A session opened for the owner with `initialize` (declaring `capabilities`) and `notifications/initialized`. */
  open(owner: SessionOwner, capabilities: Record<string, unknown>, timeoutMs?: number): Promise<Held>;
  alive(held: Held): boolean;
  /** A request on the session; throws SessionGone when the server forgot it (the call was not made). */
  call(held: Held, message: JsonRpcRequest, options: LegacyCallOptions): Promise<Record<string, unknown> | undefined>;
  listen(held: Held, listener: (notification: Record<string, unknown>) => void): (() => void) | undefined;
}

/** The server no longer knows the session (nothing was done): open another and send again. */
export class SessionGone extends Error {}

/** The session of a stdio MCP upstream's child, issued by its RpcSessions. */
export class StdioLegacy implements LegacyTransport {
  constructor(
    private readonly upstream: RpcUpstream,
    private readonly sessions: RpcSessions,
  ) {}

  get name(): string {
    return this.upstream.name;
  }

  get canListen(): boolean {
    return this.sessions.listen !== undefined && this.sessions.mode === 'per-client';
  }

  async open(owner: SessionOwner, capabilities: Record<string, unknown>, timeoutMs?: number): Promise<Held> {
    const id = await this.sessions.open(owner);
    try {
      const answer = await this.upstream.call(initializeMessage(capabilities), { session: id, timeoutMs });
      const init = initResult(answer, this.upstream.name);
      await this.upstream.call({ jsonrpc: '2.0', method: 'notifications/initialized' }, { session: id });
      return { id, subject: owner.subject, init };
    } catch (err) {
      await this.sessions.end(id, owner.subject);
      throw err;
    }
  }

  alive(held: Held): boolean {
    return this.sessions.has(held.id, held.subject);
  }

  call(held: Held, message: JsonRpcRequest, o: LegacyCallOptions): Promise<Record<string, unknown> | undefined> {
    return this.upstream.call(message, {
      timeoutMs: o.timeoutMs,
      signal: o.signal,
      session: held.id,
      trace: o.trace,
      onServerMessage: o.onServerMessage,
    });
  }

  listen(held: Held, listener: (notification: Record<string, unknown>) => void): (() => void) | undefined {
    return this.sessions.listen?.(held.id, held.subject, listener);
  }
}

/** The gateway's `initialize` of a held session. */
export function initializeMessage(capabilities: Record<string, unknown>): JsonRpcRequest {
  return {
    jsonrpc: '2.0',
    id: 'switchyard-initialize',
    method: 'initialize',
    params: { protocolVersion: legacyVersion, capabilities, clientInfo: { name: 'switchyard', version: '0.1.0' } },
  };
}

/** The initialize result, or the refusal. */
export function initResult(answer: Record<string, unknown> | undefined, upstream: string): Record<string, unknown> {
  const result = answer?.result;
  if (!result || typeof result !== 'object' || answer?.error !== undefined) {
    throw new GatewayError('upstream_error', 'The upstream refused the MCP session the gateway opened for the client', {
      details: { upstream, error: answer?.error },
    });
  }
  return result as Record<string, unknown>;
}

/** Sessions held per transport at most: past this, the longest-held is let go (the server expires it). */
const maxHeld = 1024;

/** The upstream sessions the gateway holds for modern clients, one per client (see above). */
export class HeldSessions {
  readonly #held = new Map<string, Promise<Held>>();
  /** Calls waiting for a client's answer to an input_required round, by their requestState. */
  readonly #parked = new Map<string, Parked>();

  constructor(readonly transport: LegacyTransport) {}

  /** The client's session, opened (initialize + initialized) when it has none live. */
  async of(owner: SessionOwner, timeoutMs?: number): Promise<Held> {
    const key = owner.client;
    const current = this.#held.get(key);
    if (current) {
      const held = await current.catch(() => undefined);
      if (held && !held.gone && this.transport.alive(held)) return held;
      if (this.#held.get(key) === current) this.#held.delete(key);
    }
    const again = this.#held.get(key);
    if (again) return again; // another request of the client opened it meanwhile
    this.#sweep();
    const opening = this.transport.open(owner, heldCapabilities, timeoutMs);
    if (this.#held.size >= maxHeld) this.#held.delete(this.#held.keys().next().value as string);
    this.#held.set(key, opening);
    opening.catch(() => {
      if (this.#held.get(key) === opening) this.#held.delete(key);
    });
    return opening;
  }

  /** Whether subscriptions/listen maps onto the held sessions (their servers' notifications are their own). */
  get canListen(): boolean {
    return this.transport.canListen;
  }

  /** The notifications of the client's held session, until the function returned is called. */
  listen(held: Held, listener: (notification: Record<string, unknown>) => void): (() => void) | undefined {
    return this.transport.listen(held, listener);
  }

  /** A request on the client's session; once more on a new one when the server forgot it. */
  async call(
    owner: SessionOwner,
    held: Held,
    message: JsonRpcRequest,
    options: LegacyCallOptions,
  ): Promise<Record<string, unknown> | undefined> {
    try {
      return await this.transport.call(held, message, options);
    } catch (err) {
      if (!(err instanceof SessionGone)) throw err;
      held.gone = true;
      return this.transport.call(await this.of(owner, options.timeoutMs), message, options).catch((again) => {
        if (!(again instanceof SessionGone)) throw again;
        throw new GatewayError('upstream_error', 'The upstream forgot the MCP session the gateway opened again', {
          details: { upstream: this.transport.name },
        });
      });
    }
  }

  /**
   * Parks a call whose server asked for input: the client answers by retrying its request with
   * the returned requestState (and its inputResponses) within inputWaitMs, else the server's
   * request is refused and the upstream call cancelled.
   */
  park(entry: Omit<Parked, 'timer'>): string {
    if (this.#parked.size >= maxParked) {
      const [oldest] = this.#parked.keys();
      if (oldest !== undefined) this.#giveUp(oldest, 'too many input rounds waiting');
    }
    const state = randomBytes(24).toString('base64url');
    const timer = setTimeout(() => this.#giveUp(state, 'the client did not answer in time'), inputWaitMs);
    timer.unref();
    this.#parked.set(state, { ...entry, timer });
    return state;
  }

  /** The call a retry resumes: the same client (and subject) and method, else -32602. */
  resume(state: unknown, owner: SessionOwner, method: string): Parked {
    const parked = typeof state === 'string' ? this.#parked.get(state) : undefined;
    if (!parked || parked.owner !== owner.client || parked.subject !== owner.subject || parked.method !== method) {
      throw new GatewayError('bad_request', 'Invalid params: requestState names no request waiting for input', {
        rpcCode: -32602,
        details: { reason: 'unknown, expired or another client’s requestState' },
      });
    }
    this.#parked.delete(state as string);
    clearTimeout(parked.timer);
    return parked;
  }

  #giveUp(state: string, why: string): void {
    const parked = this.#parked.get(state);
    if (!parked) return;
    this.#parked.delete(state);
    clearTimeout(parked.timer);
    parked.ask.respond({ error: { code: -32603, message: `No answer from the client: ${why}` } });
    parked.flight.abort.abort();
  }

  /** Entries of sessions that ended (each is looked at when it settled): the map stays as big as the live ones. */
  #sweep(): void {
    for (const [key, entry] of this.#held) {
      entry.then(
        (held) => {
          if ((held.gone || !this.transport.alive(held)) && this.#held.get(key) === entry) this.#held.delete(key);
        },
        () => {},
      );
    }
  }
}

/** Held sessions per upstream's sessions: shared by every route and reload using that upstream. */
const heldBySessions = new WeakMap<RpcSessions, HeldSessions>();

export function heldSessionsOf(upstream: RpcUpstream, sessions: RpcSessions): HeldSessions {
  let held = heldBySessions.get(sessions);
  if (!held) {
    held = new HeldSessions(new StdioLegacy(upstream, sessions));
    heldBySessions.set(sessions, held);
  }
  return held;
}

/** A server request of a call in flight, to be answered once. */
interface Ask {
  message: Record<string, unknown>;
  respond: NonNullable<Parameters<ServerMessageListener>[1]>;
}

/** A call waiting for the client's next round (see HeldSessions.park). */
export interface Parked {
  flight: Flight;
  ask: Ask;
  /** The input request's key in inputRequests. */
  key: string;
  owner: string;
  subject?: string;
  method: string;
  serverInfo: unknown;
  timer: NodeJS.Timeout;
}

type Step =
  | { kind: 'response'; response: Record<string, unknown> | undefined }
  | { kind: 'error'; error: unknown }
  | ({ kind: 'input' } & Ask);

/**
 * One upstream call of a modern request, across its rounds: the server's progress goes to the
 * round's sink, its requests are queued for the round to carry to the client.
 */
export class Flight {
  readonly abort = new AbortController();
  readonly #settled: Promise<Step>;
  readonly #asks: Ask[] = [];
  #wake?: () => void;
  /** The current round's progress sink (none: dropped). */
  progress?: (notification: Record<string, unknown>) => void;

  constructor(
    start: (listener: ServerMessageListener, signal: AbortSignal) => Promise<Record<string, unknown> | undefined>,
  ) {
    this.#settled = start(this.#listen, this.abort.signal).then(
      (response) => ({ kind: 'response', response }),
      (error: unknown) => ({ kind: 'error', error }),
    );
  }

  readonly #listen: ServerMessageListener = (message, respond) => {
    if (!respond) {
      this.progress?.(message);
      return;
    }
    this.#asks.push({ message, respond });
    this.#wake?.();
  };

  /** The next thing the round must carry: a server request, else the call's end. */
  async step(): Promise<Step> {
    for (;;) {
      const ask = this.#asks.shift();
      if (ask) return { kind: 'input', ...ask };
      const woke = new Promise<undefined>((resolve) => {
        this.#wake = () => resolve(undefined);
      });
      const step = await Promise.race([this.#settled, woke]);
      this.#wake = undefined;
      if (step) return step;
    }
  }
}

/** Sends a modern request to the client's legacy session and leaves the modern answer on ctx.state.answer. */
export async function proxyModern(
  ctx: GatewayContext,
  held: HeldSessions,
  rpc: JsonRpcRequest,
  timeoutMs?: number,
): Promise<void> {
  const upstream = held.transport;
  unsupportedModern(rpc);
  if (rpc.id === undefined) {
    // notifications/cancelled (or another notification): accepted, never forwarded (see above).
    respond(ctx, null, { status: 202 });
    return;
  }
  const owner = sessionOwner(ctx);
  if (rpc.method === 'subscriptions/listen') {
    if (!held.canListen) throw unmappable(rpc.method, upstream.name);
    return listenModern(ctx, held, rpc, owner, timeoutMs);
  }
  const params = asObject(rpc.params);
  let flight: Flight;
  let serverInfo: unknown;
  if (params.requestState !== undefined) {
    // A retry of an input_required round: the client's answer goes to the server's waiting request.
    const parked = held.resume(params.requestState, owner, rpc.method);
    flight = parked.flight;
    serverInfo = parked.serverInfo;
    const answer = asObject(params.inputResponses)[parked.key];
    if (answer !== null && typeof answer === 'object' && !Array.isArray(answer)) parked.ask.respond({ result: answer });
    else parked.ask.respond({ error: { code: -32602, message: `The client sent no input response ${parked.key}` } });
  } else {
    if (params.inputResponses !== undefined) {
      throw new GatewayError('bad_request', 'Invalid params: inputResponses without the requestState of its round', {
        rpcCode: -32602,
        details: { path: '$.params.requestState' },
      });
    }
    const session = await held.of(owner, timeoutMs);
    serverInfo = session.init.serverInfo;
    if (rpc.method === 'server/discover') {
      ctx.state.answer = Answer.fromJson(ctx, {
        jsonrpc: '2.0',
        id: rpc.id,
        result: discoverResult(session.init, held.canListen),
      });
      return;
    }
    flight = new Flight((listener, signal) =>
      held.call(
        owner,
        session,
        { ...rpc, params: legacyParams(rpc.params) },
        { timeoutMs, signal, trace: ctx.state.trace, requestId: ctx.state.requestId, onServerMessage: listener },
      ),
    );
  }
  const round = new Round(ctx, held, flight, rpc, owner, serverInfo, upstream.name);
  // Progress asked for and an event stream accepted: the answer streams the server's progress.
  if (progressTokenOf(rpc) !== undefined && acceptsEvents(ctx)) {
    round.stream();
    return;
  }
  answerModern(ctx, await round.run());
}

/** Notification methods a listen stream carries, by the filter field that opts in to each. */
const listChanged: Record<string, string> = {
  'notifications/tools/list_changed': 'toolsListChanged',
  'notifications/prompts/list_changed': 'promptsListChanged',
  'notifications/resources/list_changed': 'resourcesListChanged',
};
/** Most resource subscriptions one listen request makes upstream. */
const maxListenUris = 64;

/**
 * `subscriptions/listen` on the held session: its server's list changes (those the client opted in
 * to and the server declared) and the updates of the resources the client names (subscribed
 * upstream with resources/subscribe, unsubscribed when the client leaves), as an event stream led
 * by notifications/subscriptions/acknowledged, each message tagged with the subscription id.
 */
async function listenModern(
  ctx: GatewayContext,
  held: HeldSessions,
  rpc: JsonRpcRequest,
  owner: SessionOwner,
  timeoutMs?: number,
): Promise<void> {
  const upstream = held.transport;
  const session = await held.of(owner, timeoutMs);
  const declared = asObject(session.init.capabilities);
  const asked = asObject(asObject(rpc.params).notifications);
  const honored: Record<string, unknown> = {};
  for (const [family, field] of [
    ['tools', 'toolsListChanged'],
    ['prompts', 'promptsListChanged'],
    ['resources', 'resourcesListChanged'],
  ] as const) {
    if (asked[field] === true && asObject(declared[family]).listChanged === true) honored[field] = true;
  }
  const uris =
    Array.isArray(asked.resourceSubscriptions) && asObject(declared.resources).subscribe === true
      ? [...new Set(asked.resourceSubscriptions.filter((u): u is string => typeof u === 'string'))]
      : [];
  if (uris.length > maxListenUris) {
    throw new GatewayError('bad_request', `Invalid params: at most ${maxListenUris} resourceSubscriptions`, {
      rpcCode: -32602,
      details: { path: '$.params.notifications.resourceSubscriptions' },
    });
  }
  const subscriptionId = rpc.id;
  const tagged = (m: Record<string, unknown>) => {
    const params = asObject(m.params);
    return {
      ...m,
      params: { ...params, _meta: { ...asObject(params._meta), [`${meta}subscriptionId`]: subscriptionId } },
    };
  };
  const body = new PassThrough();
  const send = (m: Record<string, unknown>) => {
    if (!body.writableEnded) body.write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
  };
  const subscribed = new Set<string>();
  // Until the acknowledgement is out, what the server sends waits (it must come first).
  let queue: Record<string, unknown>[] | undefined = [];
  const stop = held.listen(session, (n) => {
    const method = String(n.method);
    const field = listChanged[method];
    const wanted =
      field !== undefined
        ? honored[field] === true
        : method === 'notifications/resources/updated' && subscribed.has(String(asObject(n.params).uri));
    if (!wanted) return;
    if (queue) queue.push(n);
    else send(tagged(n));
  });
  if (!stop) throw unmappable(rpc.method, upstream.name);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    stop();
    for (const uri of subscribed) {
      upstream
        .call(
          session,
          { jsonrpc: '2.0', id: 'switchyard-unsubscribe', method: 'resources/unsubscribe', params: { uri } },
          { timeoutMs },
        )
        .catch(() => {});
    }
    body.end();
  };
  ctx.res.once('close', end);
  try {
    for (const uri of uris) {
      const answer = await upstream.call(
        session,
        { jsonrpc: '2.0', id: 'switchyard-subscribe', method: 'resources/subscribe', params: { uri } },
        { timeoutMs },
      );
      if (answer && answer.error === undefined) subscribed.add(uri);
    }
  } catch (err) {
    ctx.res.off('close', end);
    end();
    throw err;
  }
  if (subscribed.size > 0) honored.resourceSubscriptions = [...subscribed];
  send({
    jsonrpc: '2.0',
    method: 'notifications/subscriptions/acknowledged',
    params: { notifications: honored, _meta: { [`${meta}subscriptionId`]: subscriptionId } },
  });
  for (const n of queue) send(tagged(n));
  queue = undefined;
  ctx.state.answer = new Answer(ctx, {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    body,
  });
}

/** One round of a modern request: the call's progress, then its answer, an input_required result or an error. */
class Round {
  constructor(
    private readonly ctx: GatewayContext,
    private readonly held: HeldSessions,
    private readonly flight: Flight,
    private readonly rpc: JsonRpcRequest,
    private readonly owner: SessionOwner,
    private readonly serverInfo: unknown,
    private readonly upstream: string,
  ) {}

  /** The round's response (modern shape); the client leaving gives the call up (cancelled upstream). */
  async run(): Promise<Record<string, unknown>> {
    const onClose = () => {
      if (!this.ctx.res.writableFinished) this.flight.abort.abort();
    };
    this.ctx.res.once('close', onClose);
    try {
      return await this.#answer();
    } finally {
      this.ctx.res.off('close', onClose);
      this.flight.progress = undefined;
    }
  }

  /** The answer as an event stream: each progress notification as it comes, then the response. */
  stream(): void {
    const body = new PassThrough();
    const send = (message: Record<string, unknown>) => {
      if (!body.writableEnded) body.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    };
    this.flight.progress = send;
    this.ctx.state.answer = new Answer(this.ctx, {
      status: 200,
      headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
      body,
    });
    this.run().then(
      (response) => {
        send(response);
        body.end();
      },
      (err: unknown) => {
        const error =
          err instanceof GatewayError
            ? err
            : new GatewayError('upstream_error', 'The upstream call failed', { details: { upstream: this.upstream } });
        const rendered = this.ctx.state.dialect?.render(error, this.rpc.id).body;
        send(
          (rendered as Record<string, unknown> | undefined) ?? {
            jsonrpc: '2.0',
            id: this.rpc.id,
            error: { code: error.rpcCode ?? -32603, message: error.message },
          },
        );
        body.end();
      },
    );
  }

  async #answer(): Promise<Record<string, unknown>> {
    for (;;) {
      const step = await this.flight.step();
      if (step.kind === 'error') throw step.error;
      if (step.kind === 'response') {
        if (!step.response) {
          throw new GatewayError('upstream_error', 'The upstream sent no answer', {
            details: { upstream: this.upstream },
          });
        }
        return modernResponse({ ...step.response, id: this.rpc.id }, this.rpc.method, this.serverInfo);
      }
      const method = step.message.method;
      const needed = requiredCapability(step.message);
      if (!needed || !multiRound.has(this.rpc.method)) {
        // Nothing the revision carries in a round of this request: the server gets its error.
        step.respond({
          error: { code: -32601, message: `Method not found: ${String(method)} (not mapped by the gateway)` },
        });
        continue;
      }
      if (!hasCapability(clientCapabilitiesOf(this.rpc), needed)) {
        step.respond({ error: { code: -32601, message: 'The client lacks the capability this request needs' } });
        this.flight.abort.abort();
        throw new GatewayError('bad_request', `Missing required client capability: ${Object.keys(needed).join(', ')}`, {
          rpcCode: -32021,
          details: { requiredCapabilities: needed },
        });
      }
      const key = 'input-1';
      const requestState = this.held.park({
        flight: this.flight,
        ask: step,
        key,
        owner: this.owner.client,
        subject: this.owner.subject,
        method: this.rpc.method,
        serverInfo: this.serverInfo,
      });
      const { _meta: _m, ...params } = asObject(step.message.params);
      return {
        jsonrpc: '2.0',
        id: this.rpc.id,
        result: { resultType: 'input_required', inputRequests: { [key]: { method, params } }, requestState },
      };
    }
  }
}

/** The client capability a server request needs (undefined: none the revision carries in a round). */
export function requiredCapability(message: Record<string, unknown>): Record<string, unknown> | undefined {
  const params = asObject(message.params);
  switch (message.method) {
    case 'elicitation/create':
      return { elicitation: params.mode === 'url' ? { url: {} } : {} };
    case 'sampling/createMessage':
      return { sampling: params.tools !== undefined ? { tools: {} } : {} };
    case 'roots/list':
      return { roots: {} };
    default:
      return undefined;
  }
}

/** The capabilities a modern request declares in its `_meta`. */
function clientCapabilitiesOf(rpc: JsonRpcRequest): Record<string, unknown> {
  return asObject(asObject(asObject(rpc.params)._meta)[`${meta}clientCapabilities`]);
}

/** Every capability `needed` names (one level of sub-capabilities) is declared. */
export function hasCapability(declared: Record<string, unknown>, needed: Record<string, unknown>): boolean {
  for (const [name, sub] of Object.entries(needed)) {
    const have = declared[name];
    if (have === undefined || have === null || typeof have !== 'object') return false;
    for (const key of Object.keys(asObject(sub))) if (asObject(have)[key] === undefined) return false;
  }
  return true;
}

function progressTokenOf(rpc: JsonRpcRequest): unknown {
  return asObject(asObject(rpc.params)._meta).progressToken;
}

function acceptsEvents(ctx: GatewayContext): boolean {
  return /\btext\/event-stream\b/i.test(ctx.get('accept'));
}

/** The modern answer; method not found is HTTP 404, as the revision's transport requires. */
export function answerModern(ctx: GatewayContext, response: Record<string, unknown>): void {
  const code = (response.error as { code?: unknown } | undefined)?.code;
  ctx.state.answer = Answer.fromJson(ctx, response, code === -32601 ? 404 : 200);
}

/** -32022 for a modern version other than the one mapped (when no mcp-validate stage refused it first). */
export function unsupportedModern(rpc: JsonRpcRequest): void {
  const version = modernVersionOf(rpc);
  if (version === modernVersion) return;
  throw new GatewayError('bad_request', 'Unsupported protocol version', {
    rpcCode: -32022,
    details: { supported, requested: typeof version === 'string' ? version.slice(0, 64) : null },
  });
}

/** A modern method this mapping cannot carry: a clear -32601 at once. */
export function unmappable(method: string, upstream: string): GatewayError {
  return new GatewayError(
    'not_found',
    `Method not found: ${method} is not available through this gateway for this upstream`,
    { rpcCode: -32601, details: { method, upstream } },
  );
}

/** The request's params as a legacy server reads them: the modern `_meta` keys (version, capabilities…) out. */
export function legacyParams(params: JsonRpcRequest['params']): JsonRpcRequest['params'] {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return params;
  const { _meta, ...rest } = params as Record<string, unknown>;
  if (_meta === null || typeof _meta !== 'object' || Array.isArray(_meta)) return params;
  const kept = Object.entries(_meta as Record<string, unknown>).filter(([key]) => !key.startsWith(meta));
  return kept.length > 0 ? { ...rest, _meta: Object.fromEntries(kept) } : rest;
}

/** A legacy response in the modern shape (see the header comment). */
export function modernResponse(
  response: Record<string, unknown>,
  method: string,
  serverInfo: unknown,
): Record<string, unknown> {
  const error = response.error as Record<string, unknown> | undefined;
  if (error && typeof error === 'object') {
    // Resource not found: -32002 in the 2025 revisions, invalid params in 2026-07-28.
    return error.code === -32002 ? { ...response, error: { ...error, code: -32602 } } : response;
  }
  const result = response.result;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return response;
  const r = result as Record<string, unknown>;
  const out: Record<string, unknown> = { ...r, resultType: r.resultType ?? 'complete' };
  if (cacheable.has(method)) {
    out.ttlMs ??= 0;
    out.cacheScope ??= 'private';
  }
  if (isImplementation(serverInfo)) out._meta = { ...asObject(r._meta), [serverInfoKey]: serverInfo };
  return { ...response, result: out };
}

/**
 * `server/discover`: what the upstream's initialize said, less what this mapping cannot carry
 * (list changes and resource subscriptions unless `listen`: subscriptions/listen is mapped).
 */
export function discoverResult(init: Record<string, unknown>, listen = false): Record<string, unknown> {
  const capabilities: Record<string, unknown> = {};
  const given = asObject(init.capabilities);
  for (const name of ['tools', 'prompts', 'resources', 'completions', 'experimental'] as const) {
    const value = given[name];
    if (value === null || typeof value !== 'object') continue;
    // Without subscriptions/listen through this mapping: no list-changed or resource subscriptions.
    const { listChanged: _l, subscribe: _s, ...rest } = value as Record<string, unknown>;
    capabilities[name] = name === 'experimental' || listen ? value : rest;
  }
  const result: Record<string, unknown> = {
    resultType: 'complete',
    supportedVersions: supported,
    capabilities,
    ttlMs: 0,
    cacheScope: 'private',
  };
  if (typeof init.instructions === 'string') result.instructions = init.instructions;
  if (isImplementation(init.serverInfo)) result._meta = { [serverInfoKey]: init.serverInfo };
  return result;
}

function isImplementation(v: unknown): v is Record<string, unknown> {
  const o = v as Record<string, unknown> | null;
  return o !== null && typeof o === 'object' && typeof o.name === 'string' && typeof o.version === 'string';
}

function asObject(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
