/**
 * Connection tracking and fairness for a service's main listener: how many client connections
 * are open, how many were accepted since start, and per connection its client address, when it
 * connected, how many requests it carried and how many are in flight on it. It also keeps one
 * client from locking the others out:
 *
 * - above `max` open connections Node refuses new ones at once (`server.maxConnections`);
 * - a client address with `perClient` connections open gets its next ones closed at once;
 * - when the open connections come near `max` (within `reclaimHeadroom`), idle keep-alive
 *   connections (a request served, none in flight) are closed, oldest first, so a new client
 *   finds a free slot instead of being refused;
 * - a request whose body stops arriving (no byte for `bodyIdleMs` while the service waits for
 *   it) has its connection cut. A slow but progressing upload is never cut, nor a long answer.
 *
 * Headers that do not arrive in time are Node's `headersTimeout` (see listener.ts).
 *
 * Cheap on the hot path: one record per connection (created when it is accepted), a Map lookup and
 * two number updates per request, and one sweep of the open connections every second or so.
 */
import type { IncomingMessage } from 'node:http';
import type { Server, Socket } from 'node:net';
import type { ServiceConfig } from '../config/types.ts';
import type { ConnectionCounters } from '../observability/connection-metrics.ts';
import { type Server as HttpServer, startConnectionChecks } from './listener.ts';

export interface ClientConnection {
  /** Remote `address:port` of the TCP connection (`[v6]:port` for IPv6); not X-Forwarded-For. */
  client: string;
  /** ISO 8601 time the connection was accepted. */
  connected_at: string;
  /** Requests received on it so far. */
  requests: number;
  /** Requests on it not answered yet (a response still streaming counts). */
  in_flight: number;
  duration_ms: number;
}

export interface ConnectionsSnapshot {
  active: number;
  /** Connections accepted since the service started. */
  total: number;
  /** Connections refused because `max` were open. */
  refused: number;
  /** Connections refused because their client address had `max_per_client` open. */
  refused_per_client: number;
  /** Idle keep-alive connections closed to make room near the maximum. */
  reclaimed: number;
  /** Connections cut because a request body stalled. */
  body_stalled: number;
  /** Connections closed (408) because their headers did not arrive in time. */
  header_timeouts: number;
  max: number;
  max_per_client: number;
  clients: ClientConnection[];
}

/** The fairness settings of the main listener (`limits` in the service config). */
export interface ConnectionLimits {
  max: number;
  perClient: number;
  /** Milliseconds without a byte of a request body before its connection is cut. */
  bodyIdleMs: number;
  /** Node's `headersTimeout`, set again on a reload. */
  headersMs: number;
}

/** The fairness settings of a service config's `limits`. */
export function connectionLimitsOf(limits: ServiceConfig['limits']): ConnectionLimits {
  return {
    max: limits.max_connections,
    perClient: limits.max_connections_per_client,
    bodyIdleMs: limits.body_idle_timeout_ms,
    headersMs: limits.header_timeout_ms,
  };
}

/** Per-connection counters, mutable: the request wrapper updates them. */
export interface ConnectionRecord {
  client: string;
  connectedAt: number;
  requests: number;
  inFlight: number;
  /** The request being received, while its body may still be arriving. */
  receiving?: IncomingMessage;
  /** `socket.bytesRead` at the last sweep that saw progress, and when. */
  bytesSeen: number;
  progressAt: number;
  /** Taken over by an upgrade (WebSocket): never reclaimed as an idle keep-alive. */
  upgraded: boolean;
}

export class ConnectionTracker {
  private readonly open = new Map<Socket, ConnectionRecord>();
  /** Open TCP connections per remote address (counted on accept, before any TLS handshake). */
  private readonly perAddress = new Map<string, number>();
  private total = 0;
  private refused = 0;
  private refusedPerClient = 0;
  private reclaimed = 0;
  private bodyStalled = 0;
  private headerTimeouts = 0;
  /** Date.now() of the last connection accepted (0: none yet). */
  lastAcceptedAt = 0;
  private servers: Server[] = [];
  private sweeper: NodeJS.Timeout | undefined;

  /** `counters`: the same events as Prometheus counters (observability/connection-metrics.ts). */
  constructor(
    private limits: ConnectionLimits,
    private readonly counters?: ConnectionCounters,
  ) {}

  /**
   * Tracks the connections of `server`. For a TLS server the tracked socket is the TLS socket
   * (`secureConnection`), the one requests see as `req.socket`; a connection still in its
   * handshake is not listed yet, but counts against the maximum and its client's cap.
   */
  attach(server: Server, tls: boolean): void {
    server.maxConnections = this.limits.max;
    this.servers.push(server);
    // Before the HTTP server's own 'connection' listener: a refused socket is never parsed.
    server.prependListener('connection', (socket: Socket) => this.admit(socket));
    server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      if (!socket.destroyed) this.accept(socket);
    });
    // Node ≥ 18.6 emits 'drop' for a connection refused over maxConnections.
    server.on('drop', () => {
      this.refused++;
      this.counters?.refused('max_connections');
    });
    server.on('request', (req: IncomingMessage) => this.receiving(req));
    server.on('upgrade', (req: IncomingMessage) => {
      const record = this.open.get(req.socket);
      if (record) record.upgraded = true;
    });
    server.on('close', () => this.stopSweeping());
    this.startSweeping();
  }

  /** New limits (after a reload): apply to connections accepted from now on (headers: to every request). */
  setLimits(limits: ConnectionLimits): void {
    const headersChanged = limits.headersMs !== this.limits.headersMs;
    this.limits = limits;
    for (const s of this.servers) {
      s.maxConnections = limits.max;
      (s as Server & { headersTimeout: number }).headersTimeout = limits.headersMs;
      // Checked at the pace the new bound needs.
      if (headersChanged) startConnectionChecks(s as HttpServer, limits.headersMs);
    }
    this.stopSweeping();
    if (this.servers.length > 0) this.startSweeping();
  }

  /** Counts a request on its connection; returns the record so the caller can end it. */
  requestStarted(socket: Socket): ConnectionRecord | undefined {
    const record = this.open.get(socket);
    if (record) {
      record.requests++;
      record.inFlight++;
    }
    return record;
  }

  /**
   * The keep-alive connections idle now (a request served, none in flight, not upgraded), with the
   * bytes read on each so far: `closeIfStillIdle` closes those that received nothing since.
   */
  idleNow(): Array<{ socket: Socket; bytesRead: number }> {
    const idle: Array<{ socket: Socket; bytesRead: number }> = [];
    for (const [socket, r] of this.open) {
      if (r.requests > 0 && r.inFlight === 0 && !r.upgraded) idle.push({ socket, bytesRead: socket.bytesRead });
    }
    return idle;
  }

  /** Closes the connections of `idle` that read no byte and started no request since it was taken. */
  closeIfStillIdle(idle: Array<{ socket: Socket; bytesRead: number }>): void {
    for (const { socket, bytesRead } of idle) {
      const r = this.open.get(socket);
      if (r && r.inFlight === 0 && socket.bytesRead === bytesRead) socket.destroy();
    }
  }

  snapshot(): ConnectionsSnapshot {
    const now = Date.now();
    const clients: ClientConnection[] = [];
    for (const r of this.open.values()) {
      clients.push({
        client: r.client,
        connected_at: new Date(r.connectedAt).toISOString(),
        requests: r.requests,
        in_flight: r.inFlight,
        duration_ms: now - r.connectedAt,
      });
    }
    return {
      active: this.open.size,
      total: this.total,
      refused: this.refused,
      refused_per_client: this.refusedPerClient,
      reclaimed: this.reclaimed,
      body_stalled: this.bodyStalled,
      header_timeouts: this.headerTimeouts,
      max: this.limits.max,
      max_per_client: this.limits.perClient,
      clients,
    };
  }

  /** The per-client cap, on the raw TCP connection: a refused one costs no handshake or parsing. */
  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? 'unknown';
    const count = this.perAddress.get(address) ?? 0;
    if (count >= this.limits.perClient) {
      this.refusedPerClient++;
      this.counters?.refused('per_client');
      socket.destroy();
      return;
    }
    this.perAddress.set(address, count + 1);
    socket.once('close', () => {
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.perAddress.set(address, left);
      else this.perAddress.delete(address);
    });
  }

  private accept(socket: Socket): void {
    this.total++;
    const now = Date.now();
    this.lastAcceptedAt = now;
    const record: ConnectionRecord = {
      client: clientOf(socket),
      connectedAt: now,
      requests: 0,
      inFlight: 0,
      bytesSeen: 0,
      progressAt: now,
      upgraded: false,
    };
    this.open.set(socket, record);
    socket.once('close', () => this.open.delete(socket));
    // Node answers 408 to headers over `headersTimeout` and destroys the socket with this error.
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return;
      this.headerTimeouts++;
      this.counters?.closed('header_timeout');
    });
    this.reclaimIdle();
  }

  /**
   * Near the maximum, closes idle keep-alive connections, oldest first (Map order is accept
   * order), until there is headroom again or none is idle. Connections that have not sent a
   * request yet are left to the header timeout: they may be a client in the middle of its first one.
   */
  private reclaimIdle(): void {
    const threshold = this.limits.max - reclaimHeadroom(this.limits.max);
    let excess = this.open.size - threshold;
    if (excess <= 0) return;
    for (const [socket, r] of this.open) {
      if (excess <= 0) break;
      if (r.requests === 0 || r.inFlight > 0 || r.upgraded) continue;
      this.reclaimed++;
      this.counters?.closed('idle_reclaimed');
      excess--;
      socket.destroy();
    }
  }

  private receiving(req: IncomingMessage): void {
    const record = this.open.get(req.socket);
    if (!record) return;
    record.receiving = req;
    record.bytesSeen = req.socket.bytesRead;
    record.progressAt = Date.now();
  }

  private startSweeping(): void {
    const every = Math.min(1000, Math.max(100, Math.floor(this.limits.bodyIdleMs / 4)));
    this.sweeper = setInterval(() => this.sweep(), every).unref();
  }

  private stopSweeping(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Cuts connections whose request body stalled on the client's side. */
  private sweep(): void {
    const now = Date.now();
    for (const [socket, r] of this.open) {
      const req = r.receiving;
      if (!req) continue;
      if (req.complete || req.destroyed) {
        r.receiving = undefined;
        continue;
      }
      const bytes = socket.bytesRead;
      // Bytes buffered and unread: the service is the slow side (backpressure), not the client.
      if (bytes !== r.bytesSeen || req.readableLength > 0) {
        r.bytesSeen = bytes;
        r.progressAt = now;
        continue;
      }
      if (now - r.progressAt >= this.limits.bodyIdleMs) {
        this.bodyStalled++;
        this.counters?.closed('body_stalled');
        r.receiving = undefined;
        socket.destroy();
      }
    }
  }
}

/** How close to the maximum idle keep-alive connections start being reclaimed: 1/16 of it, at least 1. */
export function reclaimHeadroom(max: number): number {
  return Math.max(1, Math.ceil(max / 16));
}

function clientOf(socket: Socket): string {
  const address = socket.remoteAddress ?? 'unknown';
  return `${address.includes(':') ? `[${address}]` : address}:${socket.remotePort ?? 0}`;
}
