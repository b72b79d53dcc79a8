/**
 * A `jsonrpc` upstream with several endpoints. An MCP session lives on the one endpoint that
 * issued it, so besides balancing (balanced.ts) each session goes back to its endpoint. The
 * binding travels in the session id itself: the `Mcp-Session-Id` an endpoint issues (in the
 * answer to an initialize, which may go anywhere) reaches the client as `<tag>.<id>`, the tag
 * naming the endpoint (an HMAC of its URL under the deployment's secret, session-tags.ts: it
 * tells a client nothing of the URL); a request carrying it goes to that endpoint with the
 * endpoint's own id restored. Nothing is kept per session in the gateway, so stickiness holds
 * across cluster workers, and across several gateway processes and restarts when they share
 * `SWITCHYARD_SESSION_TAG_SECRET`, as long as the endpoint list names the same URLs.
 *
 * When the session's endpoint is out (down, ejected, or refusing connections) while another is
 * up, or the tag names none of the endpoints (tagged by another secret or for an endpoint no
 * longer listed), the request is answered 404 `session_not_found` rather than sent elsewhere: that is the
 * transport's "initialize a new session", and the new one lands on a healthy endpoint. The
 * gateway's own `call()` (protocol: mcp) rides the same forward, so its session sticks and is
 * reopened the same way.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { JsonRpcRequest } from '../state.ts';
import { BalancedHttpUpstream } from './balanced.ts';
import { type HttpUpstreamConfig, httpDefaults } from './config.ts';
import { RpcOverHttp } from './rpc-over-http.ts';
import { endpointTag, sessionTagSecret } from './session-tags.ts';
import type { HttpForwardRequest, HttpForwardResponse, RpcCallOptions, RpcUpstream } from './types.ts';

const sessionHeader = 'mcp-session-id';

export class BalancedJsonRpcUpstream extends BalancedHttpUpstream implements RpcUpstream {
  /** Each endpoint's tag (8 hex digits of its URL's HMAC), and the way back. */
  private readonly tags: readonly string[];
  private readonly byTag: ReadonlyMap<string, number>;
  /** The endpoint a request's session is bound to, once its header is rewritten (a retry sees it again). */
  private readonly pinned = new WeakMap<HttpForwardRequest, number>();
  private readonly rpc: RpcOverHttp;

  constructor(
    name: string,
    config: HttpUpstreamConfig & { endpoints: NonNullable<HttpUpstreamConfig['endpoints']> },
    logger: Logger,
    metrics?: MetricsKit,
    environment: NodeJS.ProcessEnv = process.env,
  ) {
    super(name, config, logger, metrics);
    const { secret, random } = sessionTagSecret(environment);
    if (random) {
      logger.info(
        `upstream "${name}": MCP session tags keyed with this process's own secret; set SWITCHYARD_SESSION_TAG_SECRET ` +
          'to keep sessions across gateway processes and restarts',
      );
    }
    this.tags = this.endpoints.map((e) => endpointTag(secret, e.label));
    const byTag = new Map<string, number>();
    // The same URL twice: the first (the same server either way).
    this.tags.forEach((t, i) => {
      if (!byTag.has(t)) byTag.set(t, i);
    });
    this.byTag = byTag;
    const first = config.endpoints[0]?.url as string;
    this.rpc = new RpcOverHttp(name, httpDefaults({ ...config, url: first }), logger, (req) => this.forward(req));
  }

  call(message: JsonRpcRequest, options?: RpcCallOptions): Promise<Record<string, unknown> | undefined> {
    return this.rpc.call(message, options);
  }

  /** The gateway's own MCP session is ended before the connections close. */
  override async close(): Promise<void> {
    await this.rpc.close();
    await super.close();
  }

  /** The endpoint a client-side session id is bound to (tests, diagnostics). */
  endpointOf(sessionId: string): number | undefined {
    return this.byTag.get(sessionId.slice(0, 8));
  }

  protected override route(req: HttpForwardRequest, tried: readonly number[]): number | undefined {
    let i = this.pinned.get(req);
    if (i === undefined) {
      const sid = sessionOf(req.headers);
      if (sid === undefined || sid.charAt(8) !== '.') return undefined;
      i = this.byTag.get(sid.slice(0, 8));
      // Tagged, but by no endpoint of ours (another secret, a gateway restarted without a shared one,
      // an endpoint left the list): no endpoint holds it under that id, so the client is told at once.
      if (i === undefined) throw sessionUnknown(this.name);
      req.headers = { ...req.headers, [sessionHeader]: sid.slice(9) };
      this.pinned.set(req, i);
    }
    const gone = tried.includes(i) || (!this.isUp(i) && this.endpoints.some((_, j) => j !== i && this.isUp(j)));
    if (gone) {
      this.logger.info(
        { endpoint: this.at(i).label },
        `upstream "${this.name}": an MCP session's endpoint is out; the client is told to initialize again`,
      );
      throw sessionGone(this.name);
    }
    return i;
  }

  protected override answered(i: number, _req: HttpForwardRequest, res: HttpForwardResponse): void {
    const issued = res.headers[sessionHeader];
    if (typeof issued !== 'string') return;
    // What the client sees: the endpoint's tag before the endpoint's own id.
    res.headers[sessionHeader] = `${this.tags[i]}.${issued}`;
  }
}

function sessionOf(headers: HttpForwardRequest['headers']): string | undefined {
  const v = headers[sessionHeader] ?? headers['Mcp-Session-Id'];
  return Array.isArray(v) ? v[0] : v;
}

function sessionUnknown(upstream: string): GatewayError {
  return new GatewayError('not_found', 'This MCP session is not known here: initialize a new one', {
    code: 'session_not_found',
    rpcCode: -32000,
    details: { upstream },
  });
}

function sessionGone(upstream: string): GatewayError {
  return new GatewayError('not_found', 'The endpoint holding this MCP session is unavailable: initialize a new one', {
    code: 'session_not_found',
    rpcCode: -32000,
    details: { upstream },
  });
}
