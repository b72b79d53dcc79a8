/**
 * `jsonrpc` upstreams with one `url`: raw forwarding (inherited) plus `call()` for the gateway's
 * own JSON-RPC calls (rpc-over-http.ts, with its MCP session when `protocol: mcp`).
 */
import type { Logger } from 'pino';
import type { JsonRpcRequest } from '../state.ts';
import type { ResolvedHttpConfig } from './config.ts';
import { HttpUpstreamImpl } from './http.ts';
import { RpcOverHttp } from './rpc-over-http.ts';
import type { RpcCallOptions, RpcUpstream } from './types.ts';

export { clientInfo, MCP_PROTOCOL_VERSION } from './rpc-over-http.ts';

export class JsonRpcHttpUpstream extends HttpUpstreamImpl implements RpcUpstream {
  private readonly rpc: RpcOverHttp;

  constructor(name: string, config: ResolvedHttpConfig, logger: Logger) {
    super(name, config, logger);
    // forward() keeps each call's deadline (its native timer, the caller's signal).
    this.rpc = new RpcOverHttp(name, { ...config, forwardKeepsDeadline: true }, logger, (req) => this.forward(req));
  }

  call(message: JsonRpcRequest, options?: RpcCallOptions): Promise<Record<string, unknown> | undefined> {
    return this.rpc.call(message, options);
  }

  /** The gateway's own MCP session is ended before the connections close. */
  override async close(): Promise<void> {
    await this.rpc.close();
    await super.close();
  }
}
