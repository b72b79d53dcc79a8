/**
 * A modern MCP client (2026-07-28) in front of an MCP server over streamable HTTP: forwarded as it
 * came when the server speaks the modern revision, else mapped onto a legacy session the gateway
 * holds for the client by the one mapping of era-2026.ts, over this file's transport (HttpLegacy).
 *
 * Which: the first modern request to the upstream probes it with `server/discover`, as the
 * revision's dual-era clients do; a discover result or a modern error (-32020/-32021/-32022) says
 * modern, anything else (the 400 or 404 of a legacy server) legacy. The verdict is kept for the
 * upstream's life (a reload with another config makes another upstream); a probe that fails to
 * connect decides nothing and is tried again at the next request.
 *
 * The legacy session: `initialize` and `notifications/initialized` sent by the gateway, the
 * server's `Mcp-Session-Id` kept by it, never shown to the client; opened again once when the
 * server forgets it (404). Each request goes under an id of the gateway's own (clients of one
 * address share a session and may reuse ids at once); its answer is read as it comes (JSON, or the
 * request's event stream, whose progress notifications and server requests go to the mapping:
 * streamed progress, input_required rounds), within the proxy's timeout; the client leaving
 * cancels it (the server is sent notifications/cancelled). subscriptions/listen is not mapped
 * here (the GET stream is not read): -32601.
 */
import {
  type GatewayContext,
  GatewayError,
  type HttpForwardResponse,
  type HttpUpstream,
  type JsonRpcRequest,
  readWhole,
  type SessionOwner,
  sseData,
} from '../../runtime/index.ts';
import {
  type Held,
  HeldSessions,
  initializeMessage,
  initResult,
  type LegacyCallOptions,
  type LegacyTransport,
  legacyVersion,
  modernVersion,
  proxyModern,
  SessionGone,
} from './era-2026.ts';

/** Largest answer read whole from the upstream on a client's behalf. */
const answerLimit = 16 * 1024 * 1024;
const modernErrors = new Set([-32020, -32021, -32022]);
let wireIds = 0;

/** A legacy session over HTTP: the server's session id (none if it keeps none) and the version it chose. */
interface HttpHeld extends Held {
  session?: string;
  version: string;
}

/**
 * What an MCP upstream speaks: `modern` the 2026-07-28 revision and a legacy one (dual-era, or a
 * modern server that did not say: both eras are forwarded), `legacy` only the 2025 revisions (a
 * modern client is mapped: here), `modern-only` only 2026-07-28 (a legacy client is mapped:
 * era-2025-client.ts).
 */
export type Era = 'modern' | 'legacy' | 'modern-only';

/** The proxy's `upstream_era` option: `auto` probes the upstream with server/discover. */
export type UpstreamEra = 'auto' | 'legacy' | 'modern' | 'dual';

/** Legacy (initialize-based) versions: a server that lists none of them is modern-only. */
export const legacyVersions = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

/** Per upstream: its era (once known) and, per path, the legacy sessions held for modern clients. */
class HttpEra {
  verdict?: Promise<Era>;
  /** The verdict once settled (undefined while unknown or probing). */
  known?: Era;
  readonly held = new Map<string, HeldSessions>();
  constructor(readonly upstream: HttpUpstream) {}
}

const eras = new WeakMap<HttpUpstream, HttpEra>();

export function eraOf(upstream: HttpUpstream): HttpEra {
  let era = eras.get(upstream);
  if (!era) {
    era = new HttpEra(upstream);
    eras.set(upstream, era);
  }
  return era;
}

const configuredEras: Record<Exclude<UpstreamEra, 'auto'>, Era> = {
  legacy: 'legacy',
  dual: 'modern',
  modern: 'modern-only',
};

/** The upstream's era: as configured, else probed once (a probe that fails to connect is tried again). */
export function verdictOf(
  upstream: HttpUpstream,
  path: string,
  configured: UpstreamEra,
  timeoutMs?: number,
): Promise<Era> {
  if (configured !== 'auto') return Promise.resolve(configuredEras[configured]);
  const era = eraOf(upstream);
  if (!era.verdict) {
    const probing = probe(upstream, path, timeoutMs);
    era.verdict = probing;
    probing.then(
      (v) => {
        if (era.verdict === probing) era.known = v;
      },
      () => {
        if (era.verdict === probing) era.verdict = undefined;
      },
    );
  }
  return era.verdict;
}

/** The verdict without probing: configured, or already probed; undefined while unknown. */
export function knownVerdict(upstream: HttpUpstream, configured: UpstreamEra): Era | undefined {
  return configured !== 'auto' ? configuredEras[configured] : eras.get(upstream)?.known;
}

/**
 * True when the modern request was answered here (mapped onto a legacy session); false when the
 * upstream speaks the modern revision and the request is to be forwarded as it came.
 */
export async function proxyModernHttp(
  ctx: GatewayContext,
  upstream: HttpUpstream,
  rpc: JsonRpcRequest,
  path: string,
  timeoutMs?: number,
  configured: UpstreamEra = 'auto',
): Promise<boolean> {
  const era = eraOf(upstream);
  if ((await verdictOf(upstream, path, configured, timeoutMs)) !== 'legacy') return false;
  let held = era.held.get(path);
  if (!held) {
    held = new HeldSessions(new HttpLegacy(upstream, path));
    era.held.set(path, held);
  }
  await proxyModern(ctx, held, rpc, timeoutMs);
  return true;
}

/** A legacy MCP server's session over streamable HTTP (see above). */
class HttpLegacy implements LegacyTransport {
  readonly canListen = false;

  constructor(
    private readonly upstream: HttpUpstream,
    private readonly path: string,
  ) {}

  get name(): string {
    return this.upstream.name;
  }

  async open(owner: SessionOwner, capabilities: Record<string, unknown>, timeoutMs?: number): Promise<Held> {
    const init = initializeMessage(capabilities);
    const res = await post(this.upstream, this.path, init, undefined, { timeoutMs });
    const result = initResult(await responseOf(res, init.id, this.upstream.name, timeoutMs), this.upstream.name);
    const session = header(res.headers['mcp-session-id']);
    const version = typeof result.protocolVersion === 'string' ? result.protocolVersion : legacyVersion;
    const held: HttpHeld = { id: session ?? '', subject: owner.subject, session, version, init: result };
    const ack = await post(this.upstream, this.path, { jsonrpc: '2.0', method: 'notifications/initialized' }, held, {
      timeoutMs,
    });
    ack.body.resume();
    return held;
  }

  alive(held: Held): boolean {
    return !held.gone;
  }

  listen(): undefined {
    return undefined;
  }

  async call(held: Held, message: JsonRpcRequest, o: LegacyCallOptions): Promise<Record<string, unknown> | undefined> {
    const h = held as HttpHeld;
    // An id of the gateway's own: the clients sharing a held session may use the same ids at once.
    const wireId = `switchyard-${++wireIds}`;
    const res = await post(this.upstream, this.path, { ...message, id: wireId }, h, o);
    if (res.status === 404) {
      res.body.resume();
      throw new SessionGone();
    }
    const type = (header(res.headers['content-type']) ?? '').toLowerCase();
    if (!type.startsWith('text/event-stream')) {
      return { ...(await responseOf(res, wireId, this.upstream.name, o.timeoutMs ?? res.timeoutMs)), id: message.id };
    }
    return this.#streamed(h, res, wireId, message, o);
  }

  /** The request's event stream read as it comes: its progress and the server's requests to the mapping. */
  async #streamed(
    held: HttpHeld,
    res: HttpForwardResponse,
    wireId: string,
    message: JsonRpcRequest,
    o: LegacyCallOptions,
  ): Promise<Record<string, unknown>> {
    const ms = o.timeoutMs ?? res.timeoutMs;
    let failure: GatewayError | undefined;
    const stop = (err: GatewayError) => {
      failure ??= err;
      res.body.destroy();
    };
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(
            () =>
              stop(
                new GatewayError('upstream_timeout', `Upstream did not send its whole answer within ${ms} ms`, {
                  details: { upstream: this.upstream.name, timeout_ms: ms },
                }),
              ),
            ms,
          );
    const onAbort = () => {
      stop(new GatewayError('bad_request', 'Request aborted by the client'));
      this.#send(held, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: wireId } });
    };
    o.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const data of sseData(res.body)) {
        const m = parse(data) as Record<string, unknown> | undefined;
        if (!m || typeof m !== 'object') continue;
        if (typeof m.method !== 'string') {
          if (m.id === wireId) return { ...m, id: message.id };
          continue;
        }
        if (m.id === undefined) {
          if (m.method === 'notifications/progress') o.onServerMessage?.(m);
          continue;
        }
        const answer = (reply: Record<string, unknown>) => this.#send(held, { jsonrpc: '2.0', id: m.id, ...reply });
        if (o.onServerMessage) o.onServerMessage(m, answer);
        else answer({ error: { code: -32601, message: 'Method not found' } });
      }
    } catch (err) {
      if (!failure) throw err;
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
    }
    throw (
      failure ??
      new GatewayError('upstream_error', 'The upstream sent no JSON-RPC answer', {
        details: { upstream: this.upstream.name, status: res.status },
      })
    );
  }

  /** A message of the gateway's to the server (an answer, a cancellation): its answer is not waited for. */
  #send(held: HttpHeld, message: Record<string, unknown>): void {
    post(this.upstream, this.path, message, held, {}).then(
      (r) => r.body.resume(),
      () => {},
    );
  }
}

/** What every POST to the upstream says of its body and of the answers it takes (uncompressed, to be read). */
export const jsonPostHeaders = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'accept-encoding': 'identity',
} as const;

/** `server/discover` with the modern `_meta` and headers: which era the upstream speaks. */
async function probe(upstream: HttpUpstream, path: string, timeoutMs?: number): Promise<Era> {
  const message = {
    jsonrpc: '2.0',
    id: 'switchyard-discover',
    method: 'server/discover',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': modernVersion,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'switchyard', version: '0.1.0' },
      },
    },
  };
  const res = await upstream.forward({
    method: 'POST',
    path,
    headers: {
      ...jsonPostHeaders,
      'mcp-protocol-version': modernVersion,
      'mcp-method': 'server/discover',
    },
    body: JSON.stringify(message),
    timeoutMs,
  });
  let answer: Record<string, unknown>;
  try {
    answer = await responseOf(res, message.id, upstream.name, timeoutMs);
  } catch {
    return 'legacy'; // no JSON-RPC answer at all: a legacy server's plain 400 / 404 / 405
  }
  // The versions it lists (a discover result's, or an UnsupportedProtocolVersionError's): none of
  // the legacy ones, a modern-only server.
  const result = answer.result as Record<string, unknown> | undefined;
  const error = answer.error as { code?: unknown; data?: { supported?: unknown } } | undefined;
  const listed = result && Array.isArray(result.supportedVersions) ? result.supportedVersions : undefined;
  if (listed) return modernOrOnly(listed);
  const code = error?.code;
  if (typeof code !== 'number' || !modernErrors.has(code)) return 'legacy';
  return code === -32022 && Array.isArray(error?.data?.supported) ? modernOrOnly(error.data.supported) : 'modern';
}

function modernOrOnly(versions: unknown[]): Era {
  return versions.some((v) => typeof v === 'string' && legacyVersions.includes(v)) ? 'modern' : 'modern-only';
}

function post(
  upstream: HttpUpstream,
  path: string,
  message: Record<string, unknown> | JsonRpcRequest,
  held: HttpHeld | undefined,
  o: Pick<LegacyCallOptions, 'timeoutMs' | 'signal' | 'trace' | 'requestId'>,
): Promise<HttpForwardResponse> {
  return upstream.forward({
    method: 'POST',
    path,
    headers: {
      ...jsonPostHeaders,
      ...(held ? { 'mcp-protocol-version': held.version } : {}),
      ...(held?.session ? { 'mcp-session-id': held.session } : {}),
      ...(o.requestId ? { 'x-request-id': o.requestId } : {}),
    },
    body: JSON.stringify(message),
    timeoutMs: o.timeoutMs,
    signal: o.signal,
    trace: o.trace,
  });
}

/** The JSON-RPC response to `id` in an answer (one JSON object, or an event stream holding it). */
export async function responseOf(
  res: HttpForwardResponse,
  id: unknown,
  upstream: string,
  timeoutMs?: number,
): Promise<Record<string, unknown>> {
  const ms = timeoutMs ?? res.timeoutMs;
  const body = await readWhole(
    res.body,
    answerLimit,
    ms === undefined
      ? undefined
      : {
          ms,
          error: () =>
            new GatewayError('upstream_timeout', `Upstream did not send its whole answer within ${ms} ms`, {
              details: { upstream, timeout_ms: ms },
            }),
        },
  );
  const type = header(res.headers['content-type']) ?? '';
  const text = body.toString('utf8');
  const messages = type.toLowerCase().startsWith('text/event-stream') ? sseMessages(text) : [parse(text)];
  const found = messages.find(
    (m): m is Record<string, unknown> =>
      m !== null && typeof m === 'object' && (m as Record<string, unknown>).id === id && !('method' in (m as object)),
  );
  if (!found) {
    throw new GatewayError('upstream_error', 'The upstream sent no JSON-RPC answer', {
      details: { upstream, status: res.status },
    });
  }
  return found;
}

/** The JSON messages of an event stream's `data:` fields. */
export function sseMessages(text: string): unknown[] {
  const out: unknown[] = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data !== '') out.push(parse(data));
  }
  return out;
}

export function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
