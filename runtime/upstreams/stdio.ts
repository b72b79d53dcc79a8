/**
 * `stdio` upstreams: a JSON-RPC (or MCP) server run as child processes (stdio-child.ts). The
 * gateway's own child is always there (health, the gateway's own calls, sessionless JSON-RPC
 * clients) and restarted when it dies. MCP clients get sessions of their own: with
 * `sessions: per-client` each session runs its own child, so no client can see or cancel another's
 * calls, resources or subscriptions; with `sessions: shared` they share the gateway's child and
 * only their request ids and notifications are scoped. Sessions end on DELETE, when idle past
 * `session_idle_timeout_ms`, when their child dies, and with the upstream (reload, stop).
 *
 * Fairness: one client (its authenticated subject, else its address) holds at most
 * `max_sessions_per_client` of the `max_sessions`. When all are taken, a client under its share
 * still gets one: the longest-idle session (none in flight) of the client holding the most, if
 * that client holds more than the one asking, is ended for it; otherwise 503. A session is bound
 * to the subject that opened it: to any other (or to none) it does not exist.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { JsonRpcRequest } from '../state.ts';
import type { ResolvedStdioConfig } from './config.ts';
import { SharedSubscriptions } from './shared-subscriptions.ts';
import { StdioChild } from './stdio-child.ts';
import type { RpcCallOptions, RpcSessions, RpcUpstream, SessionOwner, UpstreamHealth } from './types.ts';

interface ClientSession {
  /** Its own child (per-client); undefined while spawning and in shared mode. */
  child?: StdioChild;
  lastUsed: number;
  inFlight: number;
  /** What its share is counted by (SessionOwner.client). */
  client: string;
  /** The subject it is bound to (SessionOwner.subject). */
  subject?: string;
  /**
   * From open() until its first call (the client's initialize) has been answered: never reclaimed
   * for another client. (The idle sweep still ends one whose initialize never comes.)
   */
  opening: boolean;
}

type Refusal = 'max_sessions' | 'per_client';

export class StdioUpstream implements RpcUpstream {
  readonly kind = 'stdio';
  readonly sessions?: RpcSessions;
  private readonly own: StdioChild;
  private readonly live = new Map<string, ClientSession>();
  private spares: Array<{ holder: { session?: string }; child: StdioChild }> = [];
  /** shared: who subscribed to what, so that no client unsubscribes another (shared-subscriptions.ts). */
  private readonly subscriptions?: SharedSubscriptions;
  private readonly sweeper?: NodeJS.Timeout;
  private readonly count?: (n: number) => void;
  private readonly refused?: (reason: Refusal) => void;
  private readonly evicted?: () => void;
  private readonly dropped?: (method: string) => void;
  private closed = false;

  constructor(
    readonly name: string,
    private readonly config: ResolvedStdioConfig,
    private readonly logger: Logger,
    metrics?: MetricsKit,
  ) {
    if (metrics) {
      const labels = { upstream: name };
      const gauge = metrics.gauge({
        name: 'switchyard_upstream_sessions',
        help: 'Live MCP client sessions of a stdio upstream (per-client: one child each)',
        labelNames: ['upstream'] as const,
      });
      this.count = (n) => gauge.set(labels, n);
      const refusedTotal = metrics.counter({
        name: 'switchyard_upstream_sessions_refused_total',
        help:
          'MCP client sessions refused (503), by reason: max_sessions (all live, none reclaimable) or ' +
          'per_client (the client held max_sessions_per_client)',
        labelNames: ['upstream', 'reason'] as const,
      });
      this.refused = (reason) => refusedTotal.inc({ upstream: name, reason });
      const evictedTotal = metrics.counter({
        name: 'switchyard_upstream_sessions_evicted_total',
        help: 'MCP client sessions ended to make room for a client under its share (max_sessions reached)',
        labelNames: ['upstream'] as const,
      });
      this.evicted = () => evictedTotal.inc(labels);
      const droppedTotal = metrics.counter({
        name: 'switchyard_upstream_notifications_dropped_total',
        help: "Client notifications dropped because they named no request of the client's own",
        labelNames: ['upstream', 'method'] as const,
      });
      this.dropped = (method) => droppedTotal.inc({ upstream: name, method });
    }
    this.own = new StdioChild(name, config, logger, {
      restart: true,
      handshake: true,
      onDropped: (method) => this.dropped?.(method),
    });
    if (config.protocol === 'mcp') {
      this.sessions = {
        mode: config.sessions,
        open: (owner) => this.openSession(owner ?? { client: `anonymous:${randomUUID()}` }),
        has: (id, subject) => this.owns(id, subject),
        end: async (id, subject) => this.owns(id, subject) && this.endSession(id, 'deleted by the client'),
        listen: (id, subject, listener) => this.listen(id, subject, listener),
      };
      const idle = config.session_idle_timeout_ms;
      this.sweeper = setInterval(() => this.sweep(), Math.min(Math.max(idle / 4, 50), 30_000));
      this.sweeper.unref();
      if (config.sessions === 'per-client') this.refillSpares();
      else this.subscriptions = new SharedSubscriptions();
    }
  }

  health(): UpstreamHealth {
    const h = this.own.health();
    if (!this.sessions) return h;
    // Pids, not session ids: an id is what lets a client act in its session.
    const pids = [...this.live.values()].flatMap((s) => (s.child?.pid === undefined ? [] : [s.child.pid]));
    return {
      ...h,
      detail: { ...h.detail, session_pids: pids, spare_pids: this.spares.flatMap((s) => s.child.pid ?? []) },
      sessions: {
        mode: this.config.sessions,
        live: this.live.size,
        max: this.config.max_sessions,
        max_per_client: this.config.max_sessions_per_client,
        clients: this.heldByClient().size,
      },
    };
  }

  ready(timeoutMs?: number): Promise<void> {
    return this.own.ready(timeoutMs);
  }

  async call(message: JsonRpcRequest, options: RpcCallOptions = {}): Promise<Record<string, unknown> | undefined> {
    const id = options.session;
    if (id === undefined) return this.callShared(message, sessionless, () => this.own.call(message, options));
    const session = this.live.get(id);
    if (!session) throw unknownSession();
    session.lastUsed = Date.now();
    session.inFlight++;
    try {
      const child = session.child ?? this.own;
      const send = () =>
        child.call(message, {
          timeoutMs: options.timeoutMs,
          signal: options.signal,
          owner: id,
          onServerMessage: options.onServerMessage,
        });
      return await (session.child ? send() : this.callShared(message, id, send));
    } finally {
      session.inFlight--;
      session.opening = false;
      session.lastUsed = Date.now();
    }
  }

  /** A call on the shared child: subscription calls are arbitrated between its clients first. */
  private async callShared(
    message: JsonRpcRequest,
    owner: string,
    send: () => Promise<Record<string, unknown> | undefined>,
  ): Promise<Record<string, unknown> | undefined> {
    const step = message.id === undefined ? undefined : this.subscriptions?.step(message as never, owner);
    if (step === 'answer') return { jsonrpc: '2.0', id: message.id, result: {} };
    const response = await send().catch((err) => {
      if (step === 'forward') this.undoSubscription(message, owner);
      throw err;
    });
    if (step === 'forward' && response?.error !== undefined) this.undoSubscription(message, owner);
    return response;
  }

  /** The server refused a subscribe (or unsubscribe): the counts go back to what it holds. */
  private undoSubscription(message: JsonRpcRequest, owner: string): void {
    const reverse = message.method === 'resources/subscribe' ? 'resources/unsubscribe' : 'resources/subscribe';
    this.subscriptions?.step({ method: reverse, params: message.params }, owner);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const ids = [...this.live.keys()];
    const spares = this.spares.splice(0).map((s) => s.child.close());
    await Promise.all([this.own.close(), ...spares, ...ids.map((id) => this.endSession(id, 'upstream closed', false))]);
  }

  /** The session exists and is bound to `subject` (undefined: opened without one). */
  private owns(id: string, subject: string | undefined): boolean {
    const session = this.live.get(id);
    return session !== undefined && session.subject === subject;
  }

  /** Live sessions per client. */
  private heldByClient(): Map<string, number> {
    const held = new Map<string, number>();
    for (const s of this.live.values()) held.set(s.client, (held.get(s.client) ?? 0) + 1);
    return held;
  }

  /**
   * The session to end for a client holding `held` when all are taken: of the clients holding
   * more than it, the one holding the most; of its sessions with no call in flight, the longest
   * idle. Undefined when there is none.
   */
  private reclaimable(held: number): string | undefined {
    const counts = this.heldByClient();
    let best: { id: string; n: number; lastUsed: number } | undefined;
    for (const [id, s] of this.live) {
      const n = counts.get(s.client) ?? 0;
      if (n <= held || s.inFlight > 0 || s.opening) continue;
      if (!best || n > best.n || (n === best.n && s.lastUsed < best.lastUsed)) best = { id, n, lastUsed: s.lastUsed };
    }
    return best?.id;
  }

  private async openSession(owner: SessionOwner): Promise<string> {
    if (this.closed) throw new GatewayError('unavailable', 'Upstream closed', { details: { upstream: this.name } });
    const max = this.config.max_sessions;
    const share = this.config.max_sessions_per_client;
    const held = this.heldByClient().get(owner.client) ?? 0;
    // A share of all of them is no share: at the cap the refusal below says so.
    if (held >= share && share < max) {
      this.refused?.('per_client');
      throw new GatewayError(
        'unavailable',
        `Too many MCP sessions for one client: this client holds ${held} of ${share} ` +
          `(max_sessions_per_client of upstream "${this.name}"); end one (DELETE with its Mcp-Session-Id) ` +
          'or retry later',
        {
          details: { upstream: this.name, client_sessions: held, max_sessions_per_client: share },
          headers: { 'Retry-After': '5' },
          rpcCode: -32000,
        },
      );
    }
    if (this.live.size >= max) {
      const victim = this.reclaimable(held);
      if (victim === undefined) {
        this.refused?.('max_sessions');
        throw new GatewayError(
          'unavailable',
          `Too many MCP sessions: ${max} of ${max} (max_sessions of upstream "${this.name}") are live; ` +
            'end one (DELETE with its Mcp-Session-Id) or retry later',
          {
            details: { upstream: this.name, live: this.live.size, max_sessions: max },
            headers: { 'Retry-After': '5' },
            rpcCode: -32000,
          },
        );
      }
      // Its slot is free at once (the child is reaped in the background); its client gets 404
      // on its next request and initializes again.
      this.evicted?.();
      void this.endSession(victim, 'evicted: max_sessions live, a client under its share needed one');
    }
    const id = randomUUID();
    const session: ClientSession = {
      lastUsed: Date.now(),
      inFlight: 0,
      client: owner.client,
      subject: owner.subject,
      opening: true,
    };
    this.live.set(id, session); // the slot is taken before the spawn: concurrent opens respect the cap
    this.count?.(this.live.size);
    if (this.config.sessions === 'per-client') {
      const started = performance.now();
      const child = this.takeSpare(id) ?? this.spawnChild({ session: id });
      session.child = child;
      this.refillSpares();
      // Starting counts as use: neither the idle sweep nor a reclaim ends it meanwhile.
      session.inFlight++;
      try {
        await child.started(this.config.call_timeout_ms);
        session.inFlight--;
        session.lastUsed = Date.now();
      } catch (err) {
        await this.endSession(id, 'child did not start');
        throw new GatewayError('upstream_error', `Session child did not start: ${(err as Error).message}`, {
          details: { upstream: this.name },
        });
      }
      this.logger.info(
        { session: id, pid: child.pid, spawn_ms: Math.round(performance.now() - started) },
        'session opened',
      );
    }
    return id;
  }

  /**
   * A session's child, not restarted when it dies: that ends its session (`holder.session`) or,
   * while it is a spare, just drops it.
   */
  private spawnChild(holder: { session?: string }): StdioChild {
    const logger = holder.session ? this.logger.child({ session: holder.session }) : this.logger;
    const child: StdioChild = new StdioChild(this.name, this.config, logger, {
      restart: false,
      handshake: false, // the client's own initialize is the handshake
      onEnded: (reason) => {
        if (holder.session !== undefined) void this.endSession(holder.session, reason);
        else this.spares = this.spares.filter((s) => s.child !== child);
      },
      onDropped: (method) => this.dropped?.(method),
    });
    return child;
  }

  /** A spare child already started (spare_sessions), bound to session `id` from now on. */
  private takeSpare(id: string): StdioChild | undefined {
    const spare = this.spares.shift();
    if (!spare) return undefined;
    spare.holder.session = id;
    return spare.child;
  }

  /** Keeps spare_sessions children started ahead of the next initialize (a spare's start is not on its path). */
  private refillSpares(): void {
    while (!this.closed && this.spares.length < this.config.spare_sessions) {
      const holder: { session?: string } = {};
      this.spares.push({ holder, child: this.spawnChild(holder) });
    }
  }

  /** Ends a session and reaps its child; false when there was no such session. */
  private async endSession(id: string, reason: string, count = true): Promise<boolean> {
    const session = this.live.get(id);
    if (!session) return false;
    this.live.delete(id);
    // After a reload the new upstream of the same name owns the gauge: a closed one leaves it.
    if (count && !this.closed) this.count?.(this.live.size);
    this.logger.info({ session: id, reason }, 'session ended');
    // shared: what only this client subscribed to ends at the server too.
    for (const uri of this.subscriptions?.release(id) ?? []) {
      if (this.closed) break;
      const unsubscribe = {
        jsonrpc: '2.0' as const,
        id: `release-${id}`,
        method: 'resources/unsubscribe',
        params: { uri },
      };
      this.own.call(unsubscribe).catch(() => {});
    }
    await session.child?.close();
    return true;
  }

  /** A session's own child's notifications (see RpcSessions.listen); the session is busy meanwhile. */
  private listen(
    id: string,
    subject: string | undefined,
    listener: (notification: Record<string, unknown>) => void,
  ): (() => void) | undefined {
    const session = this.owns(id, subject) ? this.live.get(id) : undefined;
    const child = session?.child;
    if (!session || !child) return undefined;
    session.inFlight++;
    const stop = child.listen(listener);
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      stop();
      session.inFlight--;
      session.lastUsed = Date.now();
    };
  }

  private sweep(): void {
    const before = Date.now() - this.config.session_idle_timeout_ms;
    for (const [id, s] of this.live) {
      if (s.inFlight === 0 && s.lastUsed < before) void this.endSession(id, 'idle');
    }
  }
}

/** The owner of calls from clients without a session (they share one, anonymous). */
const sessionless = '';

function unknownSession(): GatewayError {
  return new GatewayError('not_found', 'Unknown or expired MCP session: initialize a new one', {
    code: 'session_not_found',
    rpcCode: -32000,
  });
}
