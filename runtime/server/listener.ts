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
  // Node checks header deadlines on this interval (30 s by default, which let a slowloris socket
  // live up to 30 s past its deadline); fixed at creation, so a reload's new bound is checked at
  // the old pace.
  const options = { connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(headersMs / 4))) };
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
  if (onUpgrade) server.on('upgrade', onUpgrade);
  return server;
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
