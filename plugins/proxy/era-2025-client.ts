/**
 * A legacy MCP client (2025-11-25 and earlier: `initialize`, `Mcp-Session-Id`, server-to-client
 * requests) in front of an MCP server over HTTP that speaks only 2026-07-28 (stateless, its version
 * and the client's capabilities in each request's `_meta`). The reverse of era-2026.ts: the gateway
 * holds the client's session and speaks the modern revision to the upstream on its behalf.
 *
 * Which upstreams: the proxy's `upstream_era: modern`, or (`auto`) a `server/discover` probe whose
 * answer lists no legacy version — a discover result's `supportedVersions`, or the supported list of
 * a -32022 answer (era-2026-http.ts). A dual-era or legacy upstream gets legacy clients forwarded as
 * they came.
 *
 * - `initialize` is answered by the gateway from the upstream's `server/discover` (its
 *   capabilities less logging and extensions, its `io.modelcontextprotocol/serverInfo`, its
 *   instructions), at the version the client asked for when it is a legacy one (else 2025-11-25).
 *   The `Mcp-Session-Id` is the gateway's (random, bound to the authenticated subject: another
 *   subject's or an unknown id is 404), and remembers the client's capabilities and clientInfo.
 * - Every other request goes upstream under an id of the gateway's, with the modern `_meta`
 *   (protocolVersion, the session's clientCapabilities and clientInfo) and the `MCP-Protocol-Version`,
 *   `Mcp-Method` and `Mcp-Name` headers; its answer comes back in the legacy shape: `resultType`,
 *   `ttlMs` and `cacheScope` taken out, resource-not-found -32602 renumbered -32002, the modern-only
 *   errors (-32020, -32021, -32022) as -32603 naming what the upstream refused.
 * - An `input_required` result: each of its input requests (elicitation, sampling, roots) is sent to
 *   the client as a server-to-client request on the event stream of its POST, when the client
 *   declared the capability at initialize (else -32603 with `requiredCapabilities`, before any stream
 *   is opened) and accepts an event stream; the client's responses (POSTed with its session id) go
 *   back upstream as `inputResponses` with the `requestState`, until the result is complete (at most
 *   eight rounds; a client that does not answer within a minute ends the request with an error).
 * - `resources/subscribe` / `unsubscribe` and the session's GET stream map onto one upstream
 *   `subscriptions/listen` per session (opened again when what it must carry changes): the resource
 *   updates of the subscribed URIs and the list changes the server declared, sent on the client's
 *   GET stream (without one open, they are dropped, as the legacy transport allows). A URI the
 *   server does not acknowledge is -32602.
 * - `ping` is answered by the gateway; `notifications/cancelled` cancels the named request (the
 *   upstream request is closed, which is the revision's cancellation over HTTP); other client
 *   notifications are accepted and not forwarded. DELETE ends the session and all it holds.
 * - Progress: a request with a `progressToken` whose client accepts an event stream is answered
 *   with one: the upstream's `notifications/progress` for it as they come, then the response.
 * - What is not mapped is a clear error: `logging/setLevel` -32601 (not declared at initialize); a
 *   request from a client without a session (no `Mcp-Session-Id`) is mapped with no capabilities.
 *   Log notifications the upstream streams with a request are not carried.
 */
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import {
  Answer,
  encodeMcpHeaderValue,
  type GatewayContext,
  GatewayError,
  type HttpForwardResponse,
  type HttpUpstream,
  type JsonRpcRequest,
  mcpNameOf,
  readJson,
  respond,
  sessionOwner,
  sseData,
  subjectOf,
} from '../../runtime/index.ts';
import { hasCapability, legacyVersion, modernVersion, requiredCapability } from './era-2026.ts';
import {
  header,
  jsonPostHeaders,
  knownVerdict,
  legacyVersions,
  parse,
  responseOf,
  type UpstreamEra,
  verdictOf,
} from './era-2026-http.ts';
import { unknownSession } from './session-binding.ts';

const meta = 'io.modelcontextprotocol/';
/** Sessions kept per upstream path at most: past it, the longest idle one is ended. */
const maxSessions = 1024;
/**
 * Sessions one client (its subject, else its address) holds at most: past it, its own longest
 * idle one is ended, so that a client opening sessions in a loop ends its own, not the others'.
 */
const maxSessionsPerClient = 64;
/** A session with nothing open that was not used for this long is ended. */
const idleMs = 30 * 60_000;
/** How long a server request sent to the client waits for its response. */
const askWaitMs = 60_000;
/** input_required rounds of one request at most. */
const maxRounds = 8;
/** Resource subscriptions per session at most. */
const maxSubscriptions = 64;
const modernCodes = new Set([-32020, -32021, -32022]);
let wireIds = 0;

type Message = Record<string, unknown>;

interface Pending {
  resolve(result: Message): void;
  reject(err: GatewayError): void;
}

/** A legacy client's session, held by the gateway. */
interface ClientSession {
  id: string;
  /** Who its share is counted by (SessionOwner.client). */
  owner: string;
  subject?: string;
  version: string;
  capabilities: Record<string, unknown>;
  clientInfo: Record<string, unknown>;
  /** The upstream's capabilities (server/discover at initialize). */
  server: Record<string, unknown>;
  lastUsed: number;
  /** The client's GET stream. */
  stream?: PassThrough;
  subscriptions: Set<string>;
  /** The upstream subscriptions/listen request open for the session. */
  listen?: AbortController;
  /** Server requests sent to the client, waiting for its response, by their id. */
  pending: Map<string, Pending>;
  /** The client's requests in flight, by their id (JSON), for notifications/cancelled. */
  inflight: Map<string, AbortController>;
  /** The subscriptions/listen being opened (they are opened one at a time). */
  relistening?: Promise<void>;
  /** subscriptions/listen opened again in a row without success. */
  relistenFailures?: number;
}

/** The sessions of legacy clients of one modern-only upstream path. */
class LegacyClients {
  readonly #sessions = new Map<string, ClientSession>();

  constructor(
    readonly upstream: HttpUpstream,
    readonly path: string,
  ) {}

  open(init: Omit<ClientSession, 'id' | 'lastUsed' | 'subscriptions' | 'pending' | 'inflight'>): ClientSession {
    this.#sweep();
    let own = 0;
    let ownOldest: ClientSession | undefined;
    let oldest: ClientSession | undefined;
    for (const s of this.#sessions.values()) {
      if (!oldest || s.lastUsed < oldest.lastUsed) oldest = s;
      if (s.owner !== init.owner) continue;
      own++;
      if (!ownOldest || s.lastUsed < ownOldest.lastUsed) ownOldest = s;
    }
    if (own >= maxSessionsPerClient && ownOldest) this.end(ownOldest);
    else if (this.#sessions.size >= maxSessions && oldest) this.end(oldest);
    const session: ClientSession = {
      ...init,
      id: randomBytes(18).toString('base64url'),
      lastUsed: Date.now(),
      subscriptions: new Set(),
      pending: new Map(),
      inflight: new Map(),
    };
    this.#sessions.set(session.id, session);
    return session;
  }

  /** The caller's session of that id: unknown, ended or another subject's is 404. */
  get(id: string, subject: string | undefined): ClientSession {
    const session = this.#sessions.get(id);
    if (!session || session.subject !== subject) throw unknownSession();
    session.lastUsed = Date.now();
    return session;
  }

  live(session: ClientSession): boolean {
    return this.#sessions.get(session.id) === session;
  }

  end(session: ClientSession): void {
    if (this.#sessions.get(session.id) !== session) return;
    this.#sessions.delete(session.id);
    session.listen?.abort();
    session.listen = undefined;
    session.stream?.end();
    session.stream = undefined;
    for (const abort of session.inflight.values()) abort.abort();
    for (const p of session.pending.values()) p.reject(new GatewayError('not_found', 'The MCP session ended'));
    session.pending.clear();
  }

  #sweep(): void {
    const before = Date.now() - idleMs;
    for (const s of this.#sessions.values()) {
      if (s.lastUsed < before && !s.stream && s.inflight.size === 0) this.end(s);
    }
  }
}

const byUpstream = new WeakMap<HttpUpstream, Map<string, LegacyClients>>();

function clientsOf(upstream: HttpUpstream, path: string): LegacyClients {
  let paths = byUpstream.get(upstream);
  if (!paths) {
    paths = new Map();
    byUpstream.set(upstream, paths);
  }
  let clients = paths.get(path);
  if (!clients) {
    clients = new LegacyClients(upstream, path);
    paths.set(path, clients);
  }
  return clients;
}

/** An MCP client's request (worth a probe of the upstream's era); a plain JSON-RPC one is not. */
function isMcpRequest(ctx: GatewayContext): boolean {
  return (
    ctx.get('mcp-session-id') !== '' || ctx.get('mcp-protocol-version') !== '' || ctx.state.rpc?.method === 'initialize'
  );
}

/**
 * False when proxyLegacyHttp would return false without asking anything (the upstream's era is
 * known and is not modern-only, or unknown and the request not worth a probe): the caller then
 * forwards at once, with no await per request for nothing.
 */
export function mayMapLegacy(ctx: GatewayContext, upstream: HttpUpstream, configured: UpstreamEra): boolean {
  const known = knownVerdict(upstream, configured);
  return known !== undefined ? known === 'modern-only' : isMcpRequest(ctx);
}

/**
 * True when the request (a legacy client's: POST, GET or DELETE) was answered here because the
 * upstream speaks only 2026-07-28; false when it is to be forwarded as it came.
 */
export async function proxyLegacyHttp(
  ctx: GatewayContext,
  upstream: HttpUpstream,
  path: string,
  configured: UpstreamEra,
  timeoutMs?: number,
): Promise<boolean> {
  const rpc = ctx.state.rpc;
  const sessionId = ctx.get('mcp-session-id');
  // An MCP client's request is worth a probe; a plain JSON-RPC one is mapped once the era is known.
  const era = isMcpRequest(ctx)
    ? await verdictOf(upstream, path, configured, timeoutMs)
    : knownVerdict(upstream, configured);
  if (era !== 'modern-only') return false;
  const clients = clientsOf(upstream, path);
  const subject = subjectOf(ctx);
  if (ctx.method === 'DELETE') {
    if (sessionId === '') throw sessionRequired();
    clients.end(clients.get(sessionId, subject));
    respond(ctx, null, { status: 204 });
    return true;
  }
  if (ctx.method === 'GET') {
    if (sessionId === '') throw sessionRequired();
    openStream(ctx, clients, clients.get(sessionId, subject), timeoutMs);
    return true;
  }
  if (ctx.method !== 'POST') return false;
  if (!rpc) {
    // The client's response to a server request the gateway sent it (an input_required round).
    if (sessionId === '') throw sessionRequired();
    clientResponse(clients.get(sessionId, subject), await readJson(ctx));
    respond(ctx, null, { status: 202 });
    return true;
  }
  if (rpc.method === 'initialize') {
    await initialize(ctx, clients, rpc, timeoutMs);
    return true;
  }
  // Without a session (a plain JSON-RPC client): mapped statelessly, declaring no capabilities.
  const session: ClientSession =
    sessionId !== ''
      ? clients.get(sessionId, subject)
      : {
          id: '',
          owner: '',
          subject,
          version: legacyVersion,
          capabilities: {},
          clientInfo: { name: 'jsonrpc-client', version: '0' },
          server: {},
          lastUsed: Date.now(),
          subscriptions: new Set(),
          pending: new Map(),
          inflight: new Map(),
        };
  if (session.id !== '') ctx.state.mcpSession = session.id;
  if (rpc.id === undefined) {
    if (rpc.method === 'notifications/cancelled') {
      const requestId = (rpc.params as Record<string, unknown> | undefined)?.requestId;
      session.inflight.get(JSON.stringify(requestId))?.abort();
    }
    respond(ctx, null, { status: 202 });
    return true;
  }
  switch (rpc.method) {
    case 'ping':
      ctx.state.answer = Answer.fromJson(ctx, { jsonrpc: '2.0', id: rpc.id, result: {} });
      return true;
    case 'resources/subscribe':
    case 'resources/unsubscribe':
      await subscribe(ctx, clients, session, rpc, timeoutMs);
      return true;
    case 'logging/setLevel':
      throw notMapped(rpc.method, upstream.name);
    default:
      await forward(ctx, clients, session, rpc, timeoutMs);
      return true;
  }
}

/** `initialize`: the upstream's server/discover, in the legacy shape; the session opened. */
async function initialize(
  ctx: GatewayContext,
  clients: LegacyClients,
  rpc: JsonRpcRequest,
  timeoutMs?: number,
): Promise<void> {
  const params = asObject(rpc.params);
  const asked = params.protocolVersion;
  const version = typeof asked === 'string' && legacyVersions.includes(asked) ? asked : legacyVersion;
  const capabilities = asObject(params.capabilities);
  const info = asObject(params.clientInfo);
  const clientInfo =
    typeof info.name === 'string' && typeof info.version === 'string' ? info : { name: 'unknown', version: '0' };
  const probe = { capabilities, clientInfo } as Pick<ClientSession, 'capabilities' | 'clientInfo'>;
  const answer = await upstreamCall(ctx, clients, probe, 'server/discover', {}, { timeoutMs });
  if (answer.error !== undefined || answer.result === null || typeof answer.result !== 'object') {
    throw new GatewayError('upstream_error', 'The upstream (MCP 2026-07-28) refused server/discover', {
      details: { upstream: clients.upstream.name, error: answer.error },
    });
  }
  const discovered = answer.result as Message;
  const server = asObject(discovered.capabilities);
  const owner = sessionOwner(ctx);
  const session = clients.open({
    owner: owner.client,
    subject: owner.subject,
    version,
    capabilities,
    clientInfo,
    server,
  });
  const serverInfo = asObject(discovered._meta)[`${meta}serverInfo`];
  const result: Message = {
    protocolVersion: version,
    capabilities: legacyCapabilities(server),
    serverInfo: isImplementation(serverInfo) ? serverInfo : { name: clients.upstream.name, version: 'unknown' },
  };
  if (typeof discovered.instructions === 'string') result.instructions = discovered.instructions;
  ctx.set('Mcp-Session-Id', session.id);
  ctx.state.mcpSession = session.id;
  ctx.state.answer = Answer.fromJson(ctx, { jsonrpc: '2.0', id: rpc.id, result });
}

/** The server's capabilities as a legacy initialize result says them (logging and extensions are not mapped). */
function legacyCapabilities(server: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of ['tools', 'prompts', 'resources', 'completions', 'experimental']) {
    const value = server[name];
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) out[name] = value;
  }
  return out;
}

/** A request forwarded upstream, its input_required rounds carried to the client (see above). */
async function forward(
  ctx: GatewayContext,
  clients: LegacyClients,
  session: ClientSession,
  rpc: JsonRpcRequest,
  timeoutMs?: number,
): Promise<void> {
  const abort = new AbortController();
  const key = JSON.stringify(rpc.id);
  const onClose = () => {
    if (!ctx.res.writableFinished) abort.abort();
  };
  ctx.res.once('close', onClose);
  session.inflight.set(key, abort);
  const done = () => {
    ctx.res.off('close', onClose);
    if (session.inflight.get(key) === abort) session.inflight.delete(key);
  };
  const params = legacyParams(rpc.params);
  const accepts = /\btext\/event-stream\b/i.test(ctx.get('accept'));
  // Progress asked for and an event stream accepted: the answer streams the upstream's progress.
  const progress = asObject(params._meta).progressToken !== undefined && accepts;
  const out: { send?: (m: Message) => void } = {};
  const call = (p: Message) =>
    upstreamCall(ctx, clients, session, rpc.method, p, {
      timeoutMs,
      signal: abort.signal,
      onProgress: (m) => out.send?.(m),
    });
  let first: Message | undefined;
  if (!progress) {
    try {
      first = await call(params);
      if (!isInputRequired(first)) {
        ctx.state.answer = Answer.fromJson(ctx, legacyResponse(first, rpc, clients.upstream.name));
        done();
        return;
      }
      // Refused before any stream is opened: a capability the client lacks, no event stream accepted.
      inputRequestsOf(first, session, clients.upstream.name);
      if (!accepts) {
        throw new GatewayError(
          'bad_request',
          'The server asks the client for input; the request must accept text/event-stream',
          { rpcCode: -32603, details: { upstream: clients.upstream.name } },
        );
      }
    } catch (err) {
      done();
      throw err;
    }
  }
  // An event stream: the upstream's progress, the server's input requests, then the response.
  const body = new PassThrough();
  const send = (m: Message) => {
    if (!body.writableEnded) body.write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
  };
  out.send = send;
  ctx.state.answer = new Answer(ctx, {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    body,
  });
  const rounds = async (): Promise<Message> => {
    let current = first ?? (await call(params));
    for (let round = 1; isInputRequired(current); round++) {
      if (round > maxRounds) {
        throw new GatewayError('upstream_error', `The upstream asked for input more than ${maxRounds} times`, {
          details: { upstream: clients.upstream.name },
        });
      }
      const result = asObject(current.result);
      const responses: Message = {};
      for (const [name, request] of inputRequestsOf(current, session, clients.upstream.name)) {
        responses[name] = await ask(session, send, request, abort.signal);
      }
      const next: Message = { ...params, inputResponses: responses };
      if (result.requestState !== undefined) next.requestState = result.requestState;
      current = await call(next);
    }
    return legacyResponse(current, rpc, clients.upstream.name);
  };
  rounds()
    .then(send, (err: unknown) => {
      const error =
        err instanceof GatewayError
          ? err
          : new GatewayError('upstream_error', 'The upstream call failed', {
              details: { upstream: clients.upstream.name },
            });
      // Always a JSON-RPC error on the stream (its headers are gone), whatever the route's dialect.
      const data = { ...error.details, ...error.extra };
      send({
        jsonrpc: '2.0',
        id: rpc.id,
        error: {
          code: error.rpcCode ?? -32603,
          message: error.message,
          ...(Object.keys(data).length > 0 ? { data } : {}),
        },
      });
    })
    .finally(() => {
      done();
      body.end();
    });
}

/** The input requests of an input_required result, each one the client can answer; else the clear error. */
function inputRequestsOf(response: Message, session: ClientSession, upstream: string): Array<[string, Message]> {
  const requests = Object.entries(asObject(asObject(response.result).inputRequests));
  if (requests.length === 0) {
    throw new GatewayError('upstream_error', 'The upstream answered input_required with no input request', {
      details: { upstream },
    });
  }
  const out: Array<[string, Message]> = [];
  for (const [name, value] of requests) {
    const request = asObject(value);
    const needed = requiredCapability(request);
    if (!needed) {
      throw new GatewayError(
        'upstream_error',
        `The upstream asked for input the gateway cannot map: ${String(request.method)}`,
        {
          rpcCode: -32603,
          status: 200,
          details: { upstream, method: request.method },
        },
      );
    }
    if (!hasCapability(session.capabilities, needed)) {
      throw new GatewayError(
        'bad_request',
        `The server needs a client capability this client did not declare: ${Object.keys(needed).join(', ')}`,
        { rpcCode: -32603, status: 200, details: { requiredCapabilities: needed, upstream } },
      );
    }
    out.push([name, request]);
  }
  return out;
}

/** A server request sent to the client on `send`; its result, once the client POSTs it. */
function ask(
  session: ClientSession,
  send: (m: Message) => void,
  request: Message,
  signal: AbortSignal,
): Promise<Message> {
  const id = `switchyard-input-${++wireIds}`;
  return new Promise<Message>((resolve, reject) => {
    const finish = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      session.pending.delete(id);
    };
    const timer = setTimeout(() => {
      finish();
      reject(
        new GatewayError(
          'upstream_timeout',
          `The client did not answer the server's ${String(request.method)} in time`,
          {
            rpcCode: -32603,
          },
        ),
      );
    }, askWaitMs);
    timer.unref();
    const onAbort = () => {
      finish();
      reject(new GatewayError('bad_request', 'Request aborted by the client'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    session.pending.set(id, {
      resolve: (result) => {
        finish();
        resolve(result);
      },
      reject: (err) => {
        finish();
        reject(err);
      },
    });
    send({ jsonrpc: '2.0', id, method: request.method, params: request.params ?? {} });
  });
}

/** A client's POSTed response: to the server request of that id waiting in its session (else dropped). */
function clientResponse(session: ClientSession, body: unknown): void {
  const m = asObject(body);
  const pending = typeof m.id === 'string' ? session.pending.get(m.id) : undefined;
  if (!pending) return;
  const result = m.result;
  if (result !== null && typeof result === 'object' && !Array.isArray(result)) {
    pending.resolve(result as Message);
    return;
  }
  const error = asObject(m.error);
  pending.reject(
    new GatewayError(
      'bad_request',
      `The client refused the server's request: ${String(error.message ?? 'no result')}`,
      {
        rpcCode: -32603,
        details: { clientError: error },
      },
    ),
  );
}

/** resources/subscribe and unsubscribe: the session's subscriptions/listen opened again with the new set. */
async function subscribe(
  ctx: GatewayContext,
  clients: LegacyClients,
  session: ClientSession,
  rpc: JsonRpcRequest,
  timeoutMs?: number,
): Promise<void> {
  if (session.id === '') throw sessionRequired();
  const uri = asObject(rpc.params).uri;
  if (typeof uri !== 'string') {
    throw new GatewayError('bad_request', 'Invalid params: uri must be a string', {
      rpcCode: -32602,
      details: { path: '$.params.uri' },
    });
  }
  if (rpc.method === 'resources/unsubscribe') {
    session.subscriptions.delete(uri);
    await relisten(ctx, clients, session, timeoutMs).catch(() => undefined);
  } else {
    if (!session.subscriptions.has(uri) && session.subscriptions.size >= maxSubscriptions) {
      throw new GatewayError('bad_request', `Invalid params: at most ${maxSubscriptions} subscriptions per session`, {
        rpcCode: -32602,
      });
    }
    session.subscriptions.add(uri);
    let honored: string[];
    try {
      honored = await relisten(ctx, clients, session, timeoutMs);
    } catch (err) {
      session.subscriptions.delete(uri);
      throw err;
    }
    if (!honored.includes(uri)) {
      session.subscriptions.delete(uri);
      throw new GatewayError(
        'bad_request',
        'Invalid params: the server does not accept a subscription to this resource',
        {
          rpcCode: -32602,
          status: 200,
          details: { uri, upstream: clients.upstream.name },
        },
      );
    }
  }
  ctx.state.answer = Answer.fromJson(ctx, { jsonrpc: '2.0', id: rpc.id, result: {} });
}

/** The client's GET stream: the session's notifications (subscriptions/listen upstream) until it closes. */
function openStream(ctx: GatewayContext, clients: LegacyClients, session: ClientSession, timeoutMs?: number): void {
  session.stream?.end(); // one stream per session: the newer replaces it
  const body = new PassThrough();
  session.stream = body;
  ctx.res.once('close', () => {
    if (session.stream !== body) return;
    session.stream = undefined;
    if (session.subscriptions.size === 0) {
      session.listen?.abort();
      session.listen = undefined;
    }
  });
  ctx.state.answer = new Answer(ctx, {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    body,
  });
  // List changes are carried while the stream is open (a failure leaves the stream quiet).
  if (!session.listen) relisten(ctx, clients, session, timeoutMs).catch(() => undefined);
}

/**
 * Opens the session's subscriptions/listen upstream for what it must carry now (its subscriptions,
 * and the list changes the server declared when a GET stream is open), closing the previous one
 * once the new one is acknowledged; none when nothing is wanted. The resource URIs honored.
 */
function relisten(
  ctx: GatewayContext,
  clients: LegacyClients,
  session: ClientSession,
  timeoutMs?: number,
): Promise<string[]> {
  // One at a time per session: each sees (and replaces) the stream the one before it opened.
  const run = (session.relistening ?? Promise.resolve()).then(() =>
    clients.live(session) ? listenOnce(ctx, clients, session, timeoutMs) : [],
  );
  session.relistening = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

async function listenOnce(
  ctx: GatewayContext,
  clients: LegacyClients,
  session: ClientSession,
  timeoutMs?: number,
): Promise<string[]> {
  const previous = session.listen;
  const filter: Message = {};
  if (session.stream) {
    for (const [family, field] of [
      ['tools', 'toolsListChanged'],
      ['prompts', 'promptsListChanged'],
      ['resources', 'resourcesListChanged'],
    ] as const) {
      if (asObject(session.server[family]).listChanged === true) filter[field] = true;
    }
  }
  if (session.subscriptions.size > 0) filter.resourceSubscriptions = [...session.subscriptions];
  if (Object.keys(filter).length === 0) {
    previous?.abort();
    session.listen = undefined;
    return [];
  }
  const abort = new AbortController();
  const wireId = `switchyard-listen-${++wireIds}`;
  const res = await clients.upstream.forward({
    method: 'POST',
    path: clients.path,
    headers: modernHeaders(ctx, 'subscriptions/listen', undefined),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: wireId,
      method: 'subscriptions/listen',
      params: { notifications: filter, _meta: modernMeta(session) },
    }),
    signal: abort.signal,
    timeoutMs,
  });
  // Aborting after the headers (the stream replaced, the session ended) closes the upstream stream.
  abort.signal.addEventListener('abort', () => res.body.destroy(), { once: true });
  const type = (header(res.headers['content-type']) ?? '').toLowerCase();
  if (!type.startsWith('text/event-stream')) {
    // An error answer (JSON): the reason the listen was refused.
    const answer = await responseOf(res, wireId, clients.upstream.name, timeoutMs).catch(() => undefined);
    abort.abort();
    throw new GatewayError('upstream_error', 'The upstream refused subscriptions/listen', {
      details: { upstream: clients.upstream.name, error: answer?.error, status: res.status },
    });
  }
  const events = sseData(res.body)[Symbol.asyncIterator]();
  // The acknowledgement comes first (the revision requires it), within the timeout.
  const ack = await firstMessage(events, timeoutMs ?? 30_000).catch((err: unknown) => {
    abort.abort();
    throw err;
  });
  const honored = asObject(asObject(ack.params).notifications);
  if (ack.method !== 'notifications/subscriptions/acknowledged') {
    abort.abort();
    throw new GatewayError('upstream_error', 'The upstream did not acknowledge subscriptions/listen', {
      details: { upstream: clients.upstream.name, error: ack.error },
    });
  }
  if (!clients.live(session)) {
    abort.abort(); // the session ended meanwhile
    return [];
  }
  previous?.abort();
  session.listen = abort;
  session.relistenFailures = 0;
  // The stream's notifications go to the client's GET stream (its subscription id taken out).
  (async () => {
    for (;;) {
      const next = await events.next();
      if (next.done) break;
      const m = asObject(parse(next.value));
      if (typeof m.method !== 'string' || m.id !== undefined) continue;
      const { _meta, ...plain } = asObject(m.params);
      const { [`${meta}subscriptionId`]: _s, ...rest } = asObject(_meta);
      const out = Object.keys(rest).length > 0 ? { ...plain, _meta: rest } : plain;
      session.stream?.write(
        `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: m.method, params: out })}\n\n`,
      );
    }
  })()
    .catch(() => undefined)
    .finally(() => {
      if (session.listen !== abort) return;
      // Ended by the upstream while still wanted: opened again, backing off while it keeps failing.
      session.listen = undefined;
      if (!clients.live(session) || (!session.stream && session.subscriptions.size === 0)) return;
      const delay = Math.min(30_000, 1000 * 2 ** Math.min(session.relistenFailures ?? 0, 5));
      setTimeout(() => {
        if (session.listen || !clients.live(session)) return;
        relisten(ctx, clients, session, timeoutMs).catch(() => {
          session.relistenFailures = (session.relistenFailures ?? 0) + 1;
        });
      }, delay).unref();
    });
  const uris = honored.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((u): u is string => typeof u === 'string') : [];
}

async function firstMessage(events: AsyncIterator<string>, ms: number): Promise<Message> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new GatewayError('upstream_timeout', `subscriptions/listen not acknowledged within ${ms} ms`)),
      ms,
    );
  });
  try {
    const first = await Promise.race([events.next(), timeout]);
    if (first.done) throw new GatewayError('upstream_error', 'The upstream ended subscriptions/listen at once');
    return asObject(parse(first.value));
  } finally {
    clearTimeout(timer);
  }
}

/** One request to the modern upstream (JSON or an event stream holding its response): the response. */
async function upstreamCall(
  ctx: GatewayContext,
  clients: LegacyClients,
  session: Pick<ClientSession, 'capabilities' | 'clientInfo'>,
  method: string,
  params: Message,
  o: { timeoutMs?: number; signal?: AbortSignal; onProgress?: (notification: Message) => void },
): Promise<Message> {
  const wireId = `switchyard-${++wireIds}`;
  const res = await clients.upstream.forward({
    method: 'POST',
    path: clients.path,
    headers: modernHeaders(ctx, method, mcpNameOf(method, params)),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: wireId,
      method,
      params: { ...params, _meta: { ...asObject(params._meta), ...modernMeta(session) } },
    }),
    signal: o.signal,
    timeoutMs: o.timeoutMs,
    trace: ctx.state.trace,
  });
  // The client gone (or its request cancelled) while the answer comes: the upstream request is closed.
  const onAbort = () => res.body.destroy();
  o.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const type = (header(res.headers['content-type']) ?? '').toLowerCase();
    return type.startsWith('text/event-stream')
      ? await streamedResponse(res, wireId, clients.upstream.name, o.timeoutMs ?? res.timeoutMs, o.onProgress)
      : await responseOf(res, wireId, clients.upstream.name, o.timeoutMs);
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
  }
}

/** The response to `wireId` in an event stream read as it comes, its progress notifications to `onProgress`. */
async function streamedResponse(
  res: HttpForwardResponse,
  wireId: string,
  upstream: string,
  ms: number | undefined,
  onProgress?: (notification: Message) => void,
): Promise<Message> {
  let timedOut = false;
  const timer =
    ms === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          res.body.destroy();
        }, ms);
  try {
    for await (const data of sseData(res.body)) {
      const m = asObject(parse(data));
      if (typeof m.method === 'string') {
        if (m.id === undefined && m.method === 'notifications/progress') onProgress?.(m);
        continue;
      }
      if (m.id === wireId) return m;
    }
  } catch (err) {
    if (!timedOut) throw err;
  } finally {
    clearTimeout(timer);
  }
  if (timedOut) {
    throw new GatewayError('upstream_timeout', `Upstream did not send its whole answer within ${ms} ms`, {
      details: { upstream, timeout_ms: ms },
    });
  }
  throw new GatewayError('upstream_error', 'The upstream sent no JSON-RPC answer', { details: { upstream } });
}

function modernMeta(session: Pick<ClientSession, 'capabilities' | 'clientInfo'>): Message {
  return {
    [`${meta}protocolVersion`]: modernVersion,
    [`${meta}clientCapabilities`]: session.capabilities,
    [`${meta}clientInfo`]: session.clientInfo,
  };
}

function modernHeaders(ctx: GatewayContext, method: string, name: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    ...jsonPostHeaders,
    'mcp-protocol-version': modernVersion,
    'mcp-method': method,
  };
  if (name !== undefined) headers['mcp-name'] = encodeMcpHeaderValue(name);
  if (ctx.state.requestId) headers['x-request-id'] = ctx.state.requestId;
  return headers;
}

function isInputRequired(response: Message): boolean {
  return response.error === undefined && asObject(response.result).resultType === 'input_required';
}

/** A modern response in the legacy shape (see the header comment), under the client's id. */
export function legacyResponse(response: Message, rpc: JsonRpcRequest, upstream: string): Message {
  const error = response.error;
  if (error !== undefined) {
    const e = asObject(error);
    const code = e.code;
    if (code === -32602 && rpc.method === 'resources/read' && /not found/i.test(String(e.message))) {
      return { jsonrpc: '2.0', id: rpc.id, error: { ...e, code: -32002 } };
    }
    if (typeof code === 'number' && modernCodes.has(code)) {
      return {
        jsonrpc: '2.0',
        id: rpc.id,
        error: {
          code: -32603,
          message: `The upstream (MCP 2026-07-28 only) refused the request: ${String(e.message)}`,
          data: { ...asObject(e.data), upstreamCode: code, upstream },
        },
      };
    }
    return { jsonrpc: '2.0', id: rpc.id, error };
  }
  const result = response.result;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    throw new GatewayError('upstream_error', 'The upstream sent no result', { details: { upstream } });
  }
  const { resultType: _r, ttlMs: _t, cacheScope: _c, ...rest } = result as Message;
  return { jsonrpc: '2.0', id: rpc.id, result: rest };
}

/** The client's params with nothing of the legacy transport's to drop; an object always. */
function legacyParams(params: JsonRpcRequest['params']): Message {
  return params !== null && typeof params === 'object' && !Array.isArray(params) ? { ...(params as Message) } : {};
}

function sessionRequired(): GatewayError {
  return new GatewayError('bad_request', 'Mcp-Session-Id header required: use the one the initialize answer carried', {
    code: 'session_required',
    rpcCode: -32000,
  });
}

function notMapped(method: string, upstream: string): GatewayError {
  return new GatewayError(
    'not_found',
    `Method not found: ${method} is not mapped onto this upstream (MCP 2026-07-28 only)`,
    { rpcCode: -32601, status: 200, details: { method, upstream } },
  );
}

function isImplementation(v: unknown): v is Record<string, unknown> {
  const o = v as Record<string, unknown> | null;
  return o !== null && typeof o === 'object' && typeof o.name === 'string' && typeof o.version === 'string';
}

function asObject(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
