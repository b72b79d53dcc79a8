/**
 * Connection tracking and fairness for a service's main listener: how many client connections
 * are open, how many were accepted since start, and per connection its client address, when it
 * connected, how many requests it carried and how many are in flight on it. It also keeps one
 * client from locking the others out, acting under pressure only (an idle service lets one
 * address open as many connections as it likes: one app server's pool, clients behind one NAT):
 *
 * - "near the maximum" starts at `highWater` (a fraction of `max`, rounded up) connections open;
 *   from there a new connection from an address holding `perClient` is refused;
 * - within `reclaimHeadroom` of `max`, idle keep-alive connections (a request served, none in
 *   flight) and connections that have not completed their request headers `slowHeaderMs` after
 *   connecting are closed, oldest first, so a new client finds a free slot (a slowloris from
 *   many addresses cannot hold the slots until the header timeout);
 * - at `max`, a newcomer takes the slot of a connection still waiting for its headers from an
 *   address that holds at least two more than the newcomer's (fairer after the swap, so a swap
 *   never starts a cycle); without one, the newcomer is refused;
 * - a refusal is an answered `503` with `Retry-After` and `Connection: close` once the request is
 *   read (the caller answers it: `refusalOf`), not a reset the client cannot tell from a crash. A
 *   connection being refused gets `slowHeaderMs` to send its request; at most `refusalSlots(max)`
 *   wait at once, past that they are closed at once. Node's own `maxConnections` is only a
 *   backstop far above (`nodeBound`): it counts sockets until their 'close' event, those being
 *   refused and those just reclaimed too, and would reset the newcomer a reclaim made room for;
 * - a request whose body stops arriving (no byte for `bodyIdleMs` while the service waits for
 *   it) has its connection cut. A slow but progressing upload is never cut, nor a long answer.
 *
 * Headers that do not arrive in time are Node's `headersTimeout` (see listener.ts). On an HTTPS
 * listener a connection still in its TLS handshake counts against the limits but is not listed
 * (nor reclaimed) until the handshake completes.
 *
 * Cheap on the hot path: one record per connection (created when it is accepted), a Map lookup and
 * two number updates per request, and one sweep of the open connections every second or so; the
 * scans that make room run only near the maximum.
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
  /** Connections refused because their client address held `max_per_client` near the maximum. */
  refused_per_client: number;
  /** Of the refusals, those answered `503` (the others were closed before a request arrived). */
  refused_answered: number;
  /** Idle keep-alive connections closed to make room near the maximum. */
  reclaimed: number;
  /** Connections closed near the maximum because their headers were not complete after `slow_header_ms`. */
  slow_header_reclaimed: number;
  /** Connections cut because a request body stalled. */
  body_stalled: number;
  /** Connections closed (408) because their headers did not arrive in time. */
  header_timeouts: number;
  max: number;
  max_per_client: number;
  /** Open connections from which `max_per_client` applies. */
  high_water: number;
  clients: ClientConnection[];
}

/** The fairness settings of the main listener (`limits` in the service config). */
export interface ConnectionLimits {
  max: number;
  perClient: number;
  /** Fraction of `max` from which `perClient` applies. */
  highWater: number;
  /** Headers not complete after this long: reclaimable near the maximum; also a refused connection's wait. */
  slowHeaderMs: number;
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
    highWater: limits.connections_high_water,
    slowHeaderMs: limits.slow_header_ms,
    bodyIdleMs: limits.body_idle_timeout_ms,
    headersMs: limits.header_timeout_ms,
  };
}

/** Why a connection is being refused: the caller answers its request with a 503 naming it. */
export type Refusal = 'max_connections' | 'per_client';

/** Per-connection counters, mutable: the request wrapper updates them. */
export interface ConnectionRecord {
  client: string;
  /** The remote address the per-client share counts against. */
  address: string;
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
  /** `socket.bytesRead` when its last answer was done (a byte after it is a next request coming). */
  bytesAtAnswer?: number;
  /** When its last answer was done (ms, `Date.now()`). */
  answeredAt?: number;
  /** The longest its client took from an answer to sending the next request (ms): how long a stop waits for one. */
  longestGapMs: number;
}

/** A stop keeps an idle keep-alive connection open at least this long for a request on its way (ms). */
export const stopLingerMinMs = 100;
/** …and at most this long after its last answer (ms), within the drain deadline. */
export const stopLingerMaxMs = 1000;
/** The clients' recent pace is the longest gap seen over the last one to two of these (ms). */
const recentGapWindowMs = 10_000;

/**
 * How long after its last answer a stop keeps an idle keep-alive connection open: a client that
 * took up to `longestGapMs` to send its next request may be about to send one. HTTP/1.1 cannot
 * tell an idle client that the connection is going away, so closing it as the client sends loses
 * that request (the client sees the connection closed without an answer); waiting a few times the
 * clients' pace makes that race rare without holding a stop for pooled connections nobody uses.
 * (Measured: clients slowed by a loaded machine sent their next request 220-530 ms after an
 * answer, past the flat 100 ms this replaced: test/runtime/cluster-stop.test.ts.) The pace is the
 * longer of the connection's own and the longest any client took lately (`recentGapWindowMs`):
 * a connection with one answer has no pace of its own, and a stall hits a client whatever its
 * past.
 */
export function stopLingerMs(longestGapMs: number): number {
  return Math.min(stopLingerMaxMs, Math.max(stopLingerMinMs, 4 * longestGapMs));
}

/** A TCP connection admitted (counted against the limits) from accept until it closes or is reclaimed. */
interface Slot {
  address: string;
  released: boolean;
}

/** A connection being refused: answered 503 once its request is read, closed after `slowHeaderMs` without one. */
interface Refusing {
  reason: Refusal;
  timer: NodeJS.Timeout;
}

export class ConnectionTracker {
  private readonly open = new Map<Socket, ConnectionRecord>();
  /** Admitted connections per remote address (counted on accept, before any TLS handshake). */
  private readonly perAddress = new Map<string, number>();
  /** Admitted TCP connections by `address:port` (the same key for a raw socket and its TLS socket). */
  private readonly slots = new Map<string, Slot>();
  /** Connections being refused, by `address:port`. */
  private readonly refusing = new Map<string, Refusing>();
  private admitted = 0;
  private total = 0;
  private refused = 0;
  private refusedPerClient = 0;
  private refusedAnswered = 0;
  private reclaimed = 0;
  private slowHeaderReclaimed = 0;
  private bodyStalled = 0;
  private headerTimeouts = 0;
  /** Date.now() of the last connection accepted (0: none yet). */
  lastAcceptedAt = 0;
  /** The longest gap between an answer and the next request on a connection, in this window and the one before. */
  private gapWindow = { start: 0, longest: 0, previous: 0 };
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
   * handshake is not listed yet, but counts against the maximum and its client's share.
   */
  attach(server: Server, tls: boolean): void {
    server.maxConnections = nodeBound(this.limits.max);
    this.servers.push(server);
    // Before the HTTP server's own 'connection' listener: a connection closed here is never parsed.
    server.prependListener('connection', (socket: Socket) => this.admit(socket));
    server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      if (!socket.destroyed && !this.isRefusing(socket)) this.accept(socket);
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
      s.maxConnections = nodeBound(limits.max);
      (s as Server & { headersTimeout: number }).headersTimeout = limits.headersMs;
      // Checked at the pace the new bound needs.
      if (headersChanged) startConnectionChecks(s as HttpServer, limits.headersMs);
    }
    this.stopSweeping();
    if (this.servers.length > 0) this.startSweeping();
  }

  /**
   * Whether the connection of a request is being refused, and why: the caller answers the request
   * with `503`, `Retry-After` and `Connection: close` instead of serving it. Undefined (serve it)
   * for any connection admitted. Counts the refusal as answered.
   */
  refusalOf(socket: Socket): Refusal | undefined {
    // The usual case, on every request: nothing is being refused, no key is built.
    if (this.refusing.size === 0) return undefined;
    const refusing = this.refusing.get(clientOf(socket));
    if (!refusing) return undefined;
    clearTimeout(refusing.timer);
    this.refusedAnswered++;
    return refusing.reason;
  }

  /** Whether `socket` is being refused (without counting anything). */
  isRefusing(socket: Socket): boolean {
    return this.refusing.size > 0 && this.refusing.has(clientOf(socket));
  }

  /** Counts a request on its connection; returns the record so the caller can end it. */
  requestStarted(socket: Socket, now = Date.now()): ConnectionRecord | undefined {
    const record = this.open.get(socket);
    if (record) {
      record.requests++;
      record.inFlight++;
      if (record.answeredAt !== undefined) {
        const gap = now - record.answeredAt;
        if (gap > record.longestGapMs) record.longestGapMs = gap;
        this.noteGap(gap, now);
      }
    }
    return record;
  }

  private noteGap(gap: number, now: number): void {
    const w = this.gapWindow;
    if (now - w.start >= recentGapWindowMs) {
      // A window with no gap at all leaves nothing for the next one.
      w.previous = now - w.start >= 2 * recentGapWindowMs ? 0 : w.longest;
      w.longest = 0;
      w.start = now;
    }
    if (gap > w.longest) w.longest = gap;
  }

  /** The longest any client took lately from an answer to its next request (ms). */
  recentGapMs(now = Date.now()): number {
    const w = this.gapWindow;
    const age = now - w.start;
    if (age >= 2 * recentGapWindowMs) return 0;
    if (age >= recentGapWindowMs) return w.longest;
    return Math.max(w.longest, w.previous);
  }

  /** A request's answer is done (sent, or its connection closed): `record` from `requestStarted`. */
  answered(record: ConnectionRecord, socket: Socket | null, now = Date.now()): void {
    record.inFlight--;
    record.answeredAt = now;
    if (socket) record.bytesAtAnswer = socket.bytesRead;
  }

  /**
   * A stop's sweep of idle connections, instead of Node's closeIdleConnections (which counts a
   * connection that has not sent its first request as idle, and closing it as its request arrives
   * resets it). Closes, once the stop (begun at `stoppedAt`) is `stopLingerMinMs` old:
   * keep-alives with nothing in flight and no byte since their last answer, once idle for their
   * `stopLingerMs`; and connections that sent no byte for `freshMs` since they were accepted. A
   * client that connected just before the listener closed, or sends on its keep-alive connection
   * meanwhile, has its request answered (with Connection: close); one that sends nothing is
   * closed by this sweep, one that stalls by the drain deadline.
   */
  closeIdleAtStop(stoppedAt: number, freshMs: number, now = Date.now()): void {
    if (now - stoppedAt < stopLingerMinMs) return;
    const recent = this.recentGapMs(now);
    for (const [socket, r] of this.open) {
      if (this.stopState(socket, r, freshMs, recent, now) === 'closable') socket.destroy();
    }
  }

  /**
   * Whether a stop (begun at `stoppedAt`) still waits for a connection: one idle within its linger
   * or not used yet within `freshMs`, or one whose next request is arriving (bytes read, no request
   * yet). Requests in flight are the caller's to wait for.
   */
  holdsStop(stoppedAt: number, freshMs: number, now = Date.now()): boolean {
    if (now - stoppedAt < stopLingerMinMs) return this.open.size > 0;
    const recent = this.recentGapMs(now);
    for (const [socket, r] of this.open) {
      if (this.stopState(socket, r, freshMs, recent, now) === 'waiting') return true;
    }
    return false;
  }

  private stopState(
    socket: Socket,
    r: ConnectionRecord,
    freshMs: number,
    recentGapMs: number,
    now: number,
  ): 'busy' | 'waiting' | 'closable' {
    const receiving = r.receiving !== undefined && !r.receiving.complete && !r.receiving.destroyed;
    if (r.inFlight > 0 || r.upgraded || receiving) return 'busy';
    if (r.requests === 0) {
      if (socket.bytesRead > 0) return 'waiting'; // its first request is arriving
      return now - r.connectedAt >= freshMs ? 'closable' : 'waiting';
    }
    if (socket.bytesRead !== (r.bytesAtAnswer ?? socket.bytesRead)) return 'waiting'; // a next request is arriving
    const pace = Math.max(r.longestGapMs, recentGapMs);
    return now - (r.answeredAt ?? 0) >= stopLingerMs(pace) ? 'closable' : 'waiting';
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
      refused_answered: this.refusedAnswered,
      reclaimed: this.reclaimed,
      slow_header_reclaimed: this.slowHeaderReclaimed,
      body_stalled: this.bodyStalled,
      header_timeouts: this.headerTimeouts,
      max: this.limits.max,
      max_per_client: this.limits.perClient,
      high_water: highWaterMark(this.limits),
      clients,
    };
  }

  /**
   * Admission, on the raw TCP connection (before any TLS handshake or parsing): the client's share
   * near the maximum, then room at the maximum. A refused connection is kept to answer its request
   * with a 503 (at most `refusalSlots` at once), or closed at once.
   */
  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? 'unknown';
    const held = this.perAddress.get(address) ?? 0;
    const { max, perClient } = this.limits;
    if (this.admitted >= highWaterMark(this.limits) && held >= perClient) {
      this.refuse(socket, 'per_client');
      return;
    }
    if (this.admitted >= max) {
      this.reclaim(this.admitted - max + 1);
      if (this.admitted >= max && !this.swapFor(held)) {
        this.refuse(socket, 'max_connections');
        return;
      }
    }
    const slot: Slot = { address, released: false };
    const key = clientOf(socket);
    this.slots.set(key, slot);
    this.admitted++;
    this.perAddress.set(address, held + 1);
    socket.once('close', () => {
      this.release(slot);
      if (this.slots.get(key) === slot) this.slots.delete(key);
    });
  }

  /** Gives a slot back (once): when its connection closes, or as it is reclaimed (its 'close' comes later). */
  private release(slot: Slot): void {
    if (slot.released) return;
    slot.released = true;
    this.admitted--;
    const left = (this.perAddress.get(slot.address) ?? 1) - 1;
    if (left > 0) this.perAddress.set(slot.address, left);
    else this.perAddress.delete(slot.address);
  }

  private refuse(socket: Socket, reason: Refusal): void {
    if (reason === 'per_client') {
      this.refusedPerClient++;
      this.counters?.refused('per_client');
    } else {
      this.refused++;
      this.counters?.refused('max_connections');
    }
    const key = clientOf(socket);
    if (this.refusing.size >= refusalSlots(this.limits.max) || this.refusing.has(key)) {
      socket.destroy();
      return;
    }
    // No request within the short wait: closed, so refusals cannot hold file descriptors.
    const timer = setTimeout(() => socket.destroy(), this.limits.slowHeaderMs).unref();
    this.refusing.set(key, { reason, timer });
    socket.once('close', () => {
      clearTimeout(timer);
      this.refusing.delete(key);
    });
  }

  private accept(socket: Socket): void {
    this.total++;
    const now = Date.now();
    this.lastAcceptedAt = now;
    const record: ConnectionRecord = {
      client: clientOf(socket),
      address: socket.remoteAddress ?? 'unknown',
      connectedAt: now,
      requests: 0,
      inFlight: 0,
      bytesSeen: 0,
      progressAt: now,
      upgraded: false,
      longestGapMs: 0,
    };
    this.open.set(socket, record);
    socket.once('close', () => this.open.delete(socket));
    // Node answers 408 to headers over `headersTimeout` and destroys the socket with this error.
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT') return;
      this.headerTimeouts++;
      this.counters?.closed('header_timeout');
    });
    this.reclaim(this.admitted - (this.limits.max - reclaimHeadroom(this.limits.max)));
  }

  /**
   * Closes up to `wanted` connections that hold a slot for nothing, oldest first (Map order is
   * accept order): idle keep-alives, and connections whose headers are not complete
   * `slowHeaderMs` after they connected. A connection younger than that which has not sent a
   * request yet may be a client in the middle of its first one: left alone here.
   */
  private reclaim(wanted: number): void {
    if (wanted <= 0) return;
    const since = Date.now() - this.limits.slowHeaderMs;
    for (const [socket, r] of this.open) {
      if (wanted <= 0) break;
      if (r.inFlight > 0 || r.upgraded) continue;
      if (r.requests > 0) {
        this.reclaimed++;
        this.counters?.closed('idle_reclaimed');
      } else if (r.connectedAt <= since) {
        this.slowHeaderReclaimed++;
        this.counters?.closed('slow_header_reclaimed');
      } else continue;
      wanted--;
      this.close(socket);
    }
  }

  /**
   * At the maximum, for a newcomer whose address holds `held`: closes a connection that has sent
   * no complete request yet (none in flight) from the address holding the most, if that address
   * holds at least `held + 2` (after the swap neither holds more than the other did, so swaps
   * cannot go on in a cycle). Among that address's connections, the oldest goes.
   */
  private swapFor(held: number): boolean {
    let victim: Socket | undefined;
    let most = held + 1;
    for (const [socket, r] of this.open) {
      if (r.inFlight > 0 || r.upgraded || r.requests > 0) continue;
      const count = this.perAddress.get(r.address) ?? 0;
      if (count > most) {
        most = count;
        victim = socket;
      }
    }
    if (!victim) return false;
    this.slowHeaderReclaimed++;
    this.counters?.closed('slow_header_reclaimed');
    this.close(victim);
    return true;
  }

  /** Closes a connection and frees its slot now (its 'close' event comes later). */
  private close(socket: Socket): void {
    const slot = this.slots.get(clientOf(socket));
    if (slot) this.release(slot);
    this.open.delete(socket);
    socket.destroy();
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
    // After the turn's reads (header-deadlines.ts): a timer runs before them, and after a stall
    // a body whose bytes sat unread in the kernel's buffer would look stalled on the client's side.
    this.sweeper = setInterval(() => setImmediate(() => this.sweep()), every).unref();
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

/** How close to the maximum idle and slow-header connections start being reclaimed: 1/16 of it, at least 1. */
export function reclaimHeadroom(max: number): number {
  return Math.max(1, Math.ceil(max / 16));
}

/** Open connections from which the per-client share applies ("near the maximum"). */
export function highWaterMark(limits: Pick<ConnectionLimits, 'max' | 'highWater'>): number {
  return Math.min(limits.max, Math.ceil(limits.max * limits.highWater));
}

/**
 * Node's `maxConnections` (connections it closes before any listener sees them): the maximum,
 * the refusal slots, and as many again for sockets closed but not yet gone.
 */
function nodeBound(max: number): number {
  return 2 * max + refusalSlots(max);
}

/** Connections that may wait at once to be refused with a 503: 1/8 of the maximum, at least 8. */
export function refusalSlots(max: number): number {
  return Math.max(8, Math.ceil(max / 8));
}

function clientOf(socket: Socket): string {
  const address = socket.remoteAddress ?? 'unknown';
  return `${address.includes(':') ? `[${address}]` : address}:${socket.remotePort ?? 0}`;
}
