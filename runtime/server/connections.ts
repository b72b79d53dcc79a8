/**
 * Connection tracking for a service's main listener: how many client connections are open, how
 * many were accepted since start, and per connection its client address, when it connected, how
 * many requests it carried and how many are in flight on it. The listener refuses connections
 * above the maximum (`server.maxConnections`: Node closes the extra socket at once).
 *
 * Cheap on the hot path: one record per connection (created when it is accepted), a Map lookup and
 * two number updates per request.
 */
import type { Server, Socket } from 'node:net';

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
  max: number;
  clients: ClientConnection[];
}

/** Per-connection counters, mutable: the request wrapper updates them. */
export interface ConnectionRecord {
  client: string;
  connectedAt: number;
  requests: number;
  inFlight: number;
}

export class ConnectionTracker {
  private readonly open = new Map<Socket, ConnectionRecord>();
  private total = 0;
  private refused = 0;
  private servers: Server[] = [];

  constructor(private max: number) {}

  /**
   * Tracks the connections of `server`. For a TLS server the tracked socket is the TLS socket
   * (`secureConnection`), the one requests see as `req.socket`; a connection still in its
   * handshake is not listed yet, but counts against the maximum.
   */
  attach(server: Server, tls: boolean): void {
    server.maxConnections = this.max;
    this.servers.push(server);
    server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => this.accept(socket));
    // Node ≥ 18.6 emits 'drop' for a connection refused over maxConnections.
    server.on('drop', () => {
      this.refused++;
    });
  }

  /** A new maximum (after a reload): applies to connections accepted from now on. */
  setMax(max: number): void {
    this.max = max;
    for (const s of this.servers) s.maxConnections = max;
  }

  private accept(socket: Socket): void {
    this.total++;
    const record: ConnectionRecord = { client: clientOf(socket), connectedAt: Date.now(), requests: 0, inFlight: 0 };
    this.open.set(socket, record);
    socket.once('close', () => this.open.delete(socket));
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
    return { active: this.open.size, total: this.total, refused: this.refused, max: this.max, clients };
  }
}

function clientOf(socket: Socket): string {
  const address = socket.remoteAddress ?? 'unknown';
  return `${address.includes(':') ? `[${address}]` : address}:${socket.remotePort ?? 0}`;
}
