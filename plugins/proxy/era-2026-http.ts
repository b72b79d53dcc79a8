/**
 * A modern MCP client (2026-07-28) in front of an MCP server over streamable HTTP: forwarded as it
 * came when the server speaks the modern revision, else mapped onto a legacy session the gateway
 * holds for the client, as for a stdio server (era-2026.ts, whose mapping of requests and answers
 * this shares).
 *
 * Which: the first modern request to the upstream probes it with `server/discover`, as the
 * revision's dual-era clients do; a discover result or a modern error (-32020/-32021/-32022) says
 * modern, anything else (the 400 or 404 of a legacy server) legacy. The verdict is kept for the
 * upstream's life (a reload with another config makes another upstream); a probe that fails to
 * connect decides nothing and is tried again at the next request.
 *
 * The legacy session: `initialize` (no client capabilities) and `notifications/initialized` sent by
 * the gateway, the server's `Mcp-Session-Id` kept by it, never shown to the client; one per client
 * (subject, else address), opened again once when the server forgets it (404). Its answers are
 * read whole (JSON, or the event stream of the request, whose notifications are dropped), within
 * the proxy's timeout: a server that waits on a request of its own (which it may not send: the
 * session declared no capability) ends in a timeout, never a hang.
 */
import {
  Answer,
  type GatewayContext,
  GatewayError,
  type HttpForwardResponse,
  type HttpUpstream,
  type JsonRpcRequest,
  readWhole,
  sessionOwner,
} from '../../runtime/index.ts';
import {
  answerModern,
  discoverResult,
  legacyParams,
  legacyVersion,
  modernResponse,
  modernVersion,
  unmappable,
  unsupportedModern,
} from './era-2026.ts';

/** Largest answer read whole from the upstream on a client's behalf. */
const answerLimit = 16 * 1024 * 1024;
const modernErrors = new Set([-32020, -32021, -32022]);
/**
 * Sessions held per upstream: past this, the longest-held is let go (the server expires it; its
 * client, if it comes back, gets a new one). The table stays bounded whatever the clients.
 */
const maxHeld = 1024;
let wireIds = 0;

interface HttpHeld {
  session?: string;
  version: string;
  init: Record<string, unknown>;
}

/** Per upstream: its era (once known) and the legacy sessions held for modern clients. */
class HttpEra {
  verdict?: Promise<'modern' | 'legacy'>;
  readonly held = new Map<string, Promise<HttpHeld>>();
  constructor(readonly upstream: HttpUpstream) {}
}

const eras = new WeakMap<HttpUpstream, HttpEra>();

function eraOf(upstream: HttpUpstream): HttpEra {
  let era = eras.get(upstream);
  if (!era) {
    era = new HttpEra(upstream);
    eras.set(upstream, era);
  }
  return era;
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
): Promise<boolean> {
  const era = eraOf(upstream);
  if (!era.verdict) {
    const probing = probe(upstream, path, timeoutMs);
    era.verdict = probing;
    probing.catch(() => {
      if (era.verdict === probing) era.verdict = undefined;
    });
  }
  if ((await era.verdict) === 'modern') return false;
  unsupportedModern(rpc);
  if (rpc.id === undefined) {
    ctx.body = null;
    ctx.status = 202;
    return true;
  }
  if (rpc.method === 'subscriptions/listen') throw unmappable(rpc.method, upstream.name);
  const owner = sessionOwner(ctx);
  const key = owner.client;
  for (let attempt = 0; ; attempt++) {
    const held = await heldFor(era, key, path, timeoutMs);
    if (rpc.method === 'server/discover') {
      ctx.state.answer = Answer.fromJson(ctx, { jsonrpc: '2.0', id: rpc.id, result: discoverResult(held.init) });
      return true;
    }
    // An id of the gateway's own: the clients sharing a held session may use the same ids at once.
    const wireId = `switchyard-${++wireIds}`;
    const message = { ...rpc, id: wireId, params: legacyParams(rpc.params) };
    const res = await post(upstream, path, message, held, timeoutMs, ctx);
    // The server forgot the session (restarted, expired): open another, once.
    if (res.status === 404 && attempt === 0) {
      res.body.resume();
      if (era.held.get(key) !== undefined) era.held.delete(key);
      continue;
    }
    const response = await responseOf(res, wireId, upstream.name, timeoutMs);
    answerModern(ctx, modernResponse({ ...response, id: rpc.id }, rpc.method, held.init.serverInfo));
    return true;
  }
}

function heldFor(era: HttpEra, key: string, path: string, timeoutMs?: number): Promise<HttpHeld> {
  const current = era.held.get(key);
  if (current) return current;
  const opening = open(era.upstream, path, timeoutMs);
  if (era.held.size >= maxHeld) era.held.delete(era.held.keys().next().value as string);
  era.held.set(key, opening);
  opening.catch(() => {
    if (era.held.get(key) === opening) era.held.delete(key);
  });
  return opening;
}

async function open(upstream: HttpUpstream, path: string, timeoutMs?: number): Promise<HttpHeld> {
  const init = {
    jsonrpc: '2.0',
    id: 'switchyard-initialize',
    method: 'initialize',
    params: { protocolVersion: legacyVersion, capabilities: {}, clientInfo: { name: 'switchyard', version: '0.1.0' } },
  };
  const res = await post(upstream, path, init, undefined, timeoutMs);
  const answer = await responseOf(res, init.id, upstream.name, timeoutMs);
  const result = answer.result as Record<string, unknown> | undefined;
  if (!result || typeof result !== 'object') {
    throw new GatewayError('upstream_error', 'The upstream refused the MCP session the gateway opened for the client', {
      details: { upstream: upstream.name, error: answer.error },
    });
  }
  const session = header(res.headers['mcp-session-id']);
  const version = typeof result.protocolVersion === 'string' ? result.protocolVersion : legacyVersion;
  const held: HttpHeld = { session, version, init: result };
  const ack = await post(upstream, path, { jsonrpc: '2.0', method: 'notifications/initialized' }, held, timeoutMs);
  ack.body.resume();
  return held;
}

/** What every POST to the upstream says of its body and of the answers it takes (uncompressed, to be read). */
const jsonPostHeaders = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'accept-encoding': 'identity',
} as const;

/** `server/discover` with the modern `_meta` and headers: which era the upstream speaks. */
async function probe(upstream: HttpUpstream, path: string, timeoutMs?: number): Promise<'modern' | 'legacy'> {
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
  const result = answer.result as Record<string, unknown> | undefined;
  if (result && Array.isArray(result.supportedVersions)) return 'modern';
  const code = (answer.error as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && modernErrors.has(code) ? 'modern' : 'legacy';
}

function post(
  upstream: HttpUpstream,
  path: string,
  message: Record<string, unknown> | JsonRpcRequest,
  held: HttpHeld | undefined,
  timeoutMs?: number,
  ctx?: GatewayContext,
): Promise<HttpForwardResponse> {
  return upstream.forward({
    method: 'POST',
    path,
    headers: {
      ...jsonPostHeaders,
      ...(held ? { 'mcp-protocol-version': held.version } : {}),
      ...(held?.session ? { 'mcp-session-id': held.session } : {}),
      ...(ctx?.state.requestId ? { 'x-request-id': ctx.state.requestId } : {}),
    },
    body: JSON.stringify(message),
    timeoutMs,
    trace: ctx?.state.trace,
  });
}

/** The JSON-RPC response to `id` in an answer (one JSON object, or an event stream holding it). */
async function responseOf(
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
function sseMessages(text: string): unknown[] {
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

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
