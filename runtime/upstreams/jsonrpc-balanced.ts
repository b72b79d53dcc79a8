/**
 * A `jsonrpc` upstream with several endpoints. An MCP session lives on the one endpoint that
 * issued it, so besides balancing (balanced.ts) each session goes back to its endpoint. The
 * binding travels in the session id itself: the `Mcp-Session-Id` an endpoint issues (in the
 * answer to an initialize, which may go anywhere) reaches the client as `<tag>.<id>`, the tag
 * naming the endpoint (a hash of its URL); a request carrying it goes to that endpoint with the
 * endpoint's own id restored. Nothing is kept per session in the gateway, so stickiness holds
 * across cluster workers, several gateway processes and restarts, as long as the endpoint list
 * names the same URLs.
 *
 * When the session's endpoint is out (down, ejected, or refusing connections) while another is
 * up, the request is answered 404 `session_not_found` rather than sent elsewhere: that is the
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
import { hash32 } from './hash-ring.ts';
import { RpcOverHttp } from './rpc-over-http.ts';
import type { HttpForwardRequest, HttpForwardResponse, RpcCallOptions, RpcUpstream } from './types.ts';

const sessionHeader = 'mcp-session-id';

export class BalancedJsonRpcUpstream extends BalancedHttpUpstream implements RpcUpstream {
  /** Each endpoint's tag (8 hex digits of its URL's hash), and the way back. */
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
  ) {
    super(name, config, logger, metrics);
    this.tags = this.endpoints.map((e) => hash32(e.label).toString(16).padStart(8, '0'));
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
      // Not one of ours (a stale tag, a list changed): balanced; the endpoint says 404 if it is lost.
      if (i === undefined) return undefined;
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

function sessionGone(upstream: string): GatewayError {
  return new GatewayError('not_found', 'The endpoint holding this MCP session is unavailable: initialize a new one', {
    code: 'session_not_found',
    rpcCode: -32000,
    details: { upstream },
  });
}
