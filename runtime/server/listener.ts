/**
 * HTTP listeners as every listener of the gateway needs them (main, metrics, admin; in a single
 * process or in a cluster's primary), and the Prometheus text endpoint. The main listener may
 * serve HTTPS (`listen.tls`).
 */
import {
  createServer,
  type Server as HttpServer,
  type IncomingMessage,
  type RequestListener,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { checkHeadersAfterReads } from './header-deadlines.ts';

export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/** An HTTP or HTTPS listener: both have the keep-alive settings and connection controls used here. */
export type Server = HttpServer | HttpsServer;

/**
 * Where a main listener gets its connections when it does not listen itself: in a cluster
 * worker, from the primary, which accepts them (runtime/cluster-connections.ts).
 */
export interface ConnectionSource {
  /** The port the connections are accepted on. */
  port: number;
  /** Delivers the connections to `server` from now on (its 'connection' event). */
  attach(server: Server): void;
  /** Asks that no more be delivered; resolves once none will come. */
  stop(): Promise<void>;
}

/** PEM certificate chain and private key of an HTTPS listener. */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
}

/** How this machine reaches a listener bound to `host` (all interfaces: loopback). */
export function localUrl(host: string, port: number, https = false): string {
  const local = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `${https ? 'https' : 'http'}://${local.includes(':') ? `[${local}]` : local}:${port}`;
}

/** Starts a listener; resolves to the port it is bound to (useful with port 0). */
export async function startListener(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Time bounds of a listener's client connections. */
export interface ListenerTimeouts {
  /** Idle keep-alive between requests. */
  keepAliveMs: number;
  /** From accept (or a later request's first byte) to the end of its headers (slowloris). */
  headersMs: number;
}

/** Header timeout of listeners whose config does not set one (metrics, admin). */
export const defaultHeadersTimeoutMs = 10000;

export function createListener(
  handler: RequestListener,
  timeouts: ListenerTimeouts | number,
  onUpgrade?: UpgradeListener,
): HttpServer;
export function createListener(
  handler: RequestListener,
  timeouts: ListenerTimeouts | number,
  onUpgrade: UpgradeListener | undefined,
  tls: TlsMaterial | undefined,
): Server;
export function createListener(
  handler: RequestListener,
  timeouts: ListenerTimeouts | number,
  onUpgrade?: UpgradeListener,
  tls?: TlsMaterial,
): Server {
  const { keepAliveMs, headersMs } =
    typeof timeouts === 'number' ? { keepAliveMs: timeouts, headersMs: defaultHeadersTimeoutMs } : timeouts;
  const options = { connectionsCheckingInterval: headerCheckInterval(headersMs) };
  const server: Server = tls
    ? createHttpsServer({ ...options, cert: tls.cert, key: tls.key }, handler)
    : createServer(options, handler);
  // Node's defaults (5 s keep-alive, 300 s request timeout) break long-lived clients such as
  // MCP sessions behind a load balancer: keep idle connections open longer than the balancer
  // does (so it never reuses a socket we are closing), and do not cut slow request uploads as a
  // whole (a stalled body is cut by the connection tracker: connections.ts). Headers must come
  // quickly: a client that trickles them holds a connection slot for nothing.
  server.keepAliveTimeout = keepAliveMs;
  server.headersTimeout = headersMs;
  server.requestTimeout = 0;
  // Node sets up its header-deadline checks on 'listening' (registered first, so already done).
  server.on('listening', () => checkHeadersAfterReads(server));
  if (onUpgrade) server.on('upgrade', onUpgrade);
  return server;
}

/**
 * How often Node checks header deadlines for a bound of `headersMs`: its default (30 s) let a
 * slowloris socket live up to 30 s past its deadline.
 */
export function headerCheckInterval(headersMs: number): number {
  return Math.min(1000, Math.max(100, Math.floor(headersMs / 4)));
}

/**
 * (Re)starts Node's per-connection checks of an HTTP server: header deadlines, and the list of
 * connections `closeIdleConnections()` / `closeAllConnections()` work on. Node starts them only
 * on the server's 'listening' event, with the interval read then: a server fed connections from
 * elsewhere (a cluster worker's, see cluster-connections.ts) never listens, and would have neither;
 * a reload's new `header_timeout_ms` would be checked at the old pace. Emitting 'listening' runs
 * Node's own setup again (it keeps the connection list and replaces the timer); nothing else here
 * listens to that event after the start.
 */
export function startConnectionChecks(server: Server, headersMs: number): void {
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval =
    headerCheckInterval(headersMs);
  server.emit('listening');
}

/** `GET`/`HEAD <path>` answers the Prometheus text `produce` gives; anything else is 404. */
export function metricsEndpoint(
  path: string,
  produce: () => Promise<{ contentType: string; text: string }>,
): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.split('?')[0] !== path || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    produce().then(
      ({ contentType, text }) => res.writeHead(200, { 'content-type': contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${err.message}\n`),
    );
  };
}
