/**
 * A `jsonrpc` upstream with several endpoints. An MCP session lives on the one endpoint that
 * issued it, so besides balancing (balanced.ts) this keeps each session's endpoint: the answer
 * that carries a new `Mcp-Session-Id` (an initialize, which may go anywhere) binds the id to the
 * endpoint that gave it, and every later request carrying that id goes there. When that endpoint
 * is out (down, ejected, or refusing connections) while another is up, the request is answered
 * 404 `session_not_found` rather than sent elsewhere: that is the transport's "initialize a new
 * session" signal, and the new one lands on a healthy endpoint. The gateway's own `call()`
 * (protocol: mcp) rides the same forward, so its session sticks and is reopened the same way.
 *
 * The bindings live in this process (capped, least recently used dropped first): a session id
 * not known here (another gateway replica's, or from before a restart) is balanced like any
 * request (with `balance: consistent-hash` on `Mcp-Session-Id`, always to the same endpoint).
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { JsonRpcRequest } from '../state.ts';
import { BalancedHttpUpstream } from './balanced.ts';
import { type HttpUpstreamConfig, httpDefaults } from './config.ts';
import { RpcOverHttp } from './rpc-over-http.ts';
import type { HttpForwardRequest, HttpForwardResponse, RpcCallOptions, RpcUpstream } from './types.ts';

/** Session bindings kept at most (an MCP session is small; its binding is an id and an index). */
export const maxBoundSessions = 65536;

export class BalancedJsonRpcUpstream extends BalancedHttpUpstream implements RpcUpstream {
  /** Session id → endpoint index, in least-recently-used order. */
  private readonly bound = new Map<string, number>();
  private readonly rpc: RpcOverHttp;

  constructor(
    name: string,
    config: HttpUpstreamConfig & { endpoints: NonNullable<HttpUpstreamConfig['endpoints']> },
    logger: Logger,
    metrics?: MetricsKit,
  ) {
    super(name, config, logger, metrics);
    const first = config.endpoints[0]?.url as string;
    this.rpc = new RpcOverHttp(name, httpDefaults({ ...config, url: first }), logger, (req) => this.forward(req));
  }

  call(message: JsonRpcRequest, options?: RpcCallOptions): Promise<Record<string, unknown> | undefined> {
    return this.rpc.call(message, options);
  }

  /** The endpoint a session is bound to (tests, health). */
  endpointOf(sessionId: string): number | undefined {
    return this.bound.get(sessionId);
  }

  protected override route(req: HttpForwardRequest, tried: readonly number[]): number | undefined {
    const sid = sessionOf(req.headers);
    if (sid === undefined) return undefined;
    const i = this.bound.get(sid);
    if (i === undefined) return undefined;
    const out = tried.includes(i) || !this.isUp(i);
    if (out && (tried.includes(i) || this.endpoints.some((_, j) => j !== i && this.isUp(j)))) {
      this.bound.delete(sid);
      this.logger.info(
        { endpoint: this.at(i).label },
        `upstream "${this.name}": an MCP session's endpoint is out; the client is told to initialize again`,
      );
      throw sessionGone(this.name);
    }
    // Least recently used order: a session in use moves to the end.
    this.bound.delete(sid);
    this.bound.set(sid, i);
    return i;
  }

  protected override answered(i: number, req: HttpForwardRequest, res: HttpForwardResponse): void {
    const sent = sessionOf(req.headers);
    const issued = res.headers['mcp-session-id'];
    if (typeof issued === 'string' && issued !== sent) {
      this.bound.set(issued, i);
      if (this.bound.size > maxBoundSessions) {
        const oldest = this.bound.keys().next().value as string;
        this.bound.delete(oldest);
      }
    }
    // Ended by the client, or forgotten by the server.
    if (sent !== undefined && ((req.method === 'DELETE' && res.status < 300) || res.status === 404)) {
      this.bound.delete(sent);
    }
  }

  protected override extraDetail(): Record<string, unknown> {
    return { bound_sessions: this.bound.size };
  }
}

function sessionOf(headers: HttpForwardRequest['headers']): string | undefined {
  const v = headers['mcp-session-id'] ?? headers['Mcp-Session-Id'];
  return Array.isArray(v) ? v[0] : v;
}

function sessionGone(upstream: string): GatewayError {
  return new GatewayError('not_found', 'The endpoint holding this MCP session is unavailable: initialize a new one', {
    code: 'session_not_found',
    rpcCode: -32000,
    details: { upstream },
  });
}
