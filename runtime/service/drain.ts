/**
 * Draining, for a reload and for a stop. Which graph each request and response still uses (a
 * streamed body outlives its pipeline), the graphs a reload replaced until they are done, and the
 * graceful stop: every answer not started from then on says `Connection: close`, the listeners
 * stop accepting without resetting a client, idle connections close after a linger (at least
 * `lingerMs`, longer for a client that takes longer between requests: `stopLingerMs`), what is in
 * flight finishes up to `limits.drain_timeout_ms`, and what is left is answered (503 in the
 * dialect, see open-exchanges.ts).
 */
import type { ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';
import type { Logger } from 'pino';
import { drainAcceptQueue } from '../server/accept-backlog.ts';
import type { ConnectionRecord, ConnectionTracker } from '../server/connections.ts';
import type { ConnectionSource, Server } from '../server/listener.ts';
import type { UpgradeHandler } from '../server/upgrade.ts';
import type { GatewayContext } from '../state.ts';
import { closeGraph, type ServiceGraph } from './graph.ts';
import { type Exchange, OpenExchanges } from './open-exchanges.ts';

/** How long a stop waits after the last connection accepted, and for the other listeners' idle connections (ms). */
const lingerMs = 100;
/** How long a connection accepted before the listener closed may take to send its first request at a stop. */
const freshMs = 1000;

/** What the stop drains: the listeners and their connections (runtime/service/listeners.ts). */
export interface DrainedListeners {
  readonly servers: readonly Server[];
  /** The main listener, once started. */
  readonly main: Server | undefined;
  /** Where the main listener's connections come from instead of listening (a cluster worker). */
  readonly source: ConnectionSource | undefined;
  readonly connections: ConnectionTracker;
  readonly upgrades: UpgradeHandler | undefined;
  /** The access log of a request the stop answered at its deadline. */
  answeredAtStop(ctx: GatewayContext): void;
}

/** What a tracked response holds until it closes (GraphDrain.track). */
interface Held {
  drain: GraphDrain;
  graph: ServiceGraph;
  exchange: Exchange;
  connections: ConnectionTracker;
  connection: ConnectionRecord | undefined;
  socket: ServerResponse['socket'];
}
const held = Symbol('drain held');
type HeldResponse = ServerResponse & { [held]?: Held };

/** 'close' is emitted once per response: released once. */
function onHeldClose(this: HeldResponse): void {
  const h = this[held];
  if (!h) return;
  this[held] = undefined;
  h.drain.released(h);
}

export class GraphDrain {
  /** Responses not finished yet, per graph (a streamed body outlives its pipeline). */
  private readonly openResponses = new WeakMap<ServiceGraph, number>();
  /** Replaced graphs still draining; the stop closes them too. */
  private readonly retired = new Set<ServiceGraph>();
  /** Requests of the main listener not answered yet: what a stop answers at its deadline. */
  private readonly exchanges = new OpenExchanges();
  private stopping = false;

  /** `current`: the graph serving new requests now. */
  constructor(private readonly current: () => ServiceGraph) {}

  /**
   * Tracks a request of the main listener on `graph` (pinned at its arrival) and counts its
   * response as open on it until it is sent or its connection closes ('close' is emitted in both
   * cases), so that a reload or a stop waits for streamed bodies too.
   */
  track(ctx: GatewayContext, graph: ServiceGraph, connections: ConnectionTracker): void {
    const res = ctx.res as HeldResponse;
    const exchange = this.exchanges.add(ctx, graph.dialect);
    this.openResponses.set(graph, (this.openResponses.get(graph) ?? 0) + 1);
    // One record and a listener shared by every response (not a closure and a once-wrapper each).
    res[held] = {
      drain: this,
      graph,
      exchange,
      connections,
      connection: connections.requestStarted(ctx.req.socket),
      socket: res.socket,
    };
    res.on('close', onHeldClose);
  }

  /** The response of a tracked request closed (sent, or its connection gone). */
  released(h: Held): void {
    this.openResponses.set(h.graph, (this.openResponses.get(h.graph) ?? 1) - 1);
    this.exchanges.done(h.exchange);
    if (h.connection) h.connections.answered(h.connection, h.socket);
  }

  /** True while a request, a response body or an upgraded connection still uses `graph`. */
  busy(graph: ServiceGraph): boolean {
    // graph.inflight: pipelines running and upgraded connections (runtime/server/handler.ts, upgrade.ts).
    return graph.inflight > 0 || (this.openResponses.get(graph) ?? 0) > 0;
  }

  /** True while the current graph or a replaced one still draining is in use. */
  anyBusy(): boolean {
    return this.busy(this.current()) || [...this.retired].some((g) => this.busy(g));
  }

  /** Responses still open on `graph`. */
  openOn(graph: ServiceGraph): number {
    return this.openResponses.get(graph) ?? 0;
  }

  /** Replaced graphs still draining. */
  get draining(): number {
    return this.retired.size;
  }

  /**
   * Closes a graph a reload replaced once the requests and responses still using it are done, or
   * after `drainMs` (the new graph's `limits.drain_timeout_ms`).
   */
  retire(old: ServiceGraph, drainMs: number): void {
    this.retired.add(old);
    const deadline = Date.now() + drainMs;
    const attempt = () => {
      if (!this.retired.has(old) || this.stopping) return; // the stop takes over
      if (this.busy(old) && Date.now() < deadline) {
        setTimeout(attempt, 50).unref();
        return;
      }
      void this.closeRetired(old);
    };
    attempt();
  }

  /**
   * Closes a retired graph's stages and resources, and the upstreams no live graph (the current
   * one, or another still draining) shares: an upstream carried over is closed by its last owner.
   */
  private closeRetired(graph: ServiceGraph): Promise<void> {
    this.retired.delete(graph);
    const live = [this.current(), ...this.retired];
    const upstreams = new Map(
      live.flatMap((g, i) => [...g.upstreams].map(([name, u]) => [`${i}:${name}`, u] as const)),
    );
    // closeGraph keeps the upstreams of its `keep` graph; here that is every live graph's.
    return closeGraph(graph, { upstreams } as ServiceGraph);
  }

  /**
   * The graceful stop, up to closing the listeners: every answer not started from now on says
   * `Connection: close`; stop accepting connections; close idle connections after their linger
   * (see below); let in-flight requests and the responses still streaming (on the current graph and on
   * replaced ones still draining) finish, up to `drainMs`; answer what is left; then close every
   * connection and wait for the listeners to close. The graphs are closed by `closeGraphs`.
   */
  async stop(listeners: DrainedListeners, drainMs: number, logger: Logger): Promise<void> {
    this.stopping = true;
    const { servers, main, connections } = listeners;
    const started = Date.now();
    const deadline = started + drainMs;
    this.exchanges.startDraining();
    // Until the main listener's source says no more connections come (a cluster worker: the
    // primary passes on those it accepted already), connections may still arrive; so they may
    // until a listener accepted those already in its accept queue (closing it would reset them:
    // server/accept-backlog.ts).
    const source = main ? listeners.source : undefined;
    const stopAccepting = servers.map((s) =>
      s === main && source
        ? source.stop()
        : drainAcceptQueue(s, deadline).then((drained) => {
            if (s === main) logger.info(drained, 'accept queue drained: listener closed');
          }),
    );
    let accepting = true;
    void Promise.allSettled(stopAccepting).then(() => {
      accepting = false;
    });
    const closed = servers.map((s, i) => {
      // The other listeners' (admin, metrics) connections answered after the stop began close
      // `lingerMs` after their answer (Node's timer); the main listener's are the sweep's below.
      if (s !== main) s.keepAliveTimeout = lingerMs;
      if (s === main && source) return Promise.resolve();
      return (stopAccepting[i] as Promise<void>).then(() => stopListening(s));
    });
    // Connections may be accepted while the accept queue drains: the stop goes on until none was
    // for `lingerMs` (a new one gets up to `freshMs` for its first request, see closeIdleAtStop).
    const quietSince = () => Math.max(started, connections.lastAcceptedAt);
    // The main listener's idle keep-alives stay open for a request their client may be sending:
    // each for its linger (runtime/server/connections.ts `stopLingerMs`), so a request sent on one
    // is read and answered with Connection: close instead of meeting a closed socket.
    while (
      (this.anyBusy() ||
        accepting ||
        Date.now() < quietSince() + lingerMs ||
        connections.holdsStop(started, freshMs)) &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, Math.max(1, Math.min(25, deadline - Date.now()))));
      // After the loop's poll phase: a request that arrived while the loop was busy is read first
      // (Node counts a connection whose request is still unread as idle, and closing it with
      // unread bytes resets it).
      await new Promise((r) => setImmediate(r));
      connections.closeIdleAtStop(started, freshMs);
      if (Date.now() >= quietSince() + lingerMs) for (const s of servers) if (s !== main) s.closeIdleConnections();
    }
    const answered = await this.exchanges.answerRemaining((ctx) => listeners.answeredAtStop(ctx));
    if (answered > 0) logger.warn({ answered }, 'drain timeout: requests still open were answered 503 or ended');
    for (const s of servers) s.closeAllConnections();
    await listeners.upgrades?.shutdown();
    await Promise.all(closed);
  }

  /** At the end of a stop: closes the replaced graphs still draining, then the current one. */
  async closeGraphs(): Promise<void> {
    for (const g of [...this.retired]) await this.closeRetired(g);
    await closeGraph(this.current());
  }
}

/**
 * Stops accepting connections, leaving the open ones alone. Node's http `close()` also closes the
 * idle ones at once, which resets a request a client sent on one just then; here that waits for
 * `lingerMs` (see stop()).
 */
function stopListening(server: Server): Promise<void> {
  return new Promise((resolve) => {
    netServerClose.call(server, () => resolve());
  });
}
const netServerClose = NetServer.prototype.close;
