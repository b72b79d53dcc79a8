/**
 * The main listeners of a cluster (`serve --workers N`): the primary accepts every connection
 * itself and passes it to a worker over the IPC channel, round-robin, as node:cluster's own
 * round-robin mode does, but with a stop in the right order.
 *
 * Why not node:cluster's shared listeners: a worker that stops closes its share; the primary
 * keeps accepting until the last worker closed its own, and resets the connections it accepted
 * meanwhile for workers that no longer take them (its RoundRobinHandle closes them). Clients
 * that reconnected right after a SIGTERM saw 1–12 ECONNRESET per stop under load
 * (test/services/graceful-stop.test.ts); `NODE_CLUSTER_SCHED_POLICY=none` did no better.
 *
 * Here the order is: the primary closes its listening socket first (a later client gets a clean
 * ECONNREFUSED: it knows nothing was sent), passes on what it accepted already, and only then
 * tells each worker that no more connections will come (`no-more`, after every connection it
 * sent on the same ordered channel). A worker that stops on its own (a SIGTERM to its pid or to
 * the process group) asks to stop receiving; the primary lets it go once another worker takes
 * new connections or the primary itself stopped accepting, and sends it connections until then
 * (answered with `Connection: close`: it is draining).
 *
 * The primary closes its listening socket behind a plug (server/plug-close.ts): clients that
 * reconnect at once keep its accept queue filled, and a plain close reset them (1–18
 * ECONNRESET per SIGTERM to the primary under reconnecting load, test/runtime/cluster-stop.test.ts).
 */
import type { Worker } from 'node:cluster';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { type ConnectionSource, type Server, startConnectionChecks } from './server/listener.ts';
import { closeBehindPlug, type PlugClose, type PlugOutcome } from './server/plug-close.ts';

export type ConnectionMessage =
  | { sy: 'conn'; service: number }
  | { sy: 'stop-accepting'; service: number }
  | { sy: 'no-more'; service: number };

/** What a worker is for one service's connections. */
type WorkerState = 'accepting' | 'stopping' | 'released';

/** The primary's side for one service's main listener. */
export class ConnectionDispatch {
  private readonly server: NetServer;
  /** Ready workers, in the order they became ready; round-robin among those that may receive. */
  private readonly workers = new Map<Worker, WorkerState>();
  /** Connections accepted while no worker could take them (all restarting). */
  private readonly queue: Socket[] = [];
  private turn = 0;
  /**
   * Accepted connections the primary closed instead of handing them on, by reason (logged when
   * the cluster stops): each may have reset a client that had sent its request.
   */
  readonly dropped: Record<string, number> = {};
  /** How long the plug's window was (PlugClose.windowMs): logged with the stop. */
  get plugWindowMs(): number | undefined {
    return this.plug?.windowMs;
  }
  /** The listening socket is closed: every connection it will ever pass on is passed on. */
  private closed = false;
  /** A stop is under way: waiting for the plug before the listening socket is closed. */
  private plug: PlugClose | undefined;
  private host = '127.0.0.1';
  /** Set before `listenerClosed` (field order): its executor replaces it. */
  private onListenerClosed: (how: PlugOutcome | 'at once') => void = () => {};
  /** Resolves once the listening socket is closed (every connection it accepted handed on). */
  private readonly listenerClosed = new Promise<PlugOutcome | 'at once'>((resolve) => {
    this.onListenerClosed = resolve;
  });

  constructor(
    private readonly service: number,
    /** More connections than this waiting for a worker are closed (the listener's max_connections). */
    private readonly maxQueued: number,
  ) {
    // Paused: the primary never reads a byte; the request stays in the socket for the worker.
    this.server = createServer({ pauseOnConnect: true }, (socket) => this.dispatch(socket));
  }

  listen(host: string, port: number): Promise<number> {
    this.host = host;
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  /** A worker that serves the service: it receives connections from now on. */
  add(worker: Worker): void {
    this.workers.set(worker, 'accepting');
    this.flush();
    this.releaseStopping();
  }

  /** A worker that exited. */
  remove(worker: Worker): void {
    this.workers.delete(worker);
    this.releaseStopping();
  }

  /** The worker asks to receive no more connections: told `no-more` as soon as that holds. */
  stopAccepting(worker: Worker): void {
    if (this.workers.get(worker) === 'accepting') this.workers.set(worker, 'stopping');
    else if (!this.workers.has(worker)) this.send(worker, { sy: 'no-more', service: this.service });
    this.releaseStopping();
  }

  /**
   * Stops accepting, hands on what was accepted, then releases every worker. On Linux the
   * listening socket is closed once the kernel's accept queue is empty and can take no client
   * (the plug, above); elsewhere at once.
   */
  close(): Promise<PlugOutcome | 'at once'> {
    if (!this.closed && !this.plug) {
      this.plug = closeBehindPlug(this.server, this.host, (how) => this.closeListener(how));
      if (!this.plug) this.closeListener('at once');
    }
    return this.listenerClosed;
  }

  private closeListener(how: PlugOutcome | 'at once'): void {
    if (this.closed) return;
    this.closed = true;
    this.onListenerClosed(how);
    // Not waited for: net.Server's callback waits until every connection passed on has closed.
    this.server.close();
    this.flush();
    for (const socket of this.queue.splice(0)) this.drop(socket, 'queued at close');
    this.releaseStopping();
  }

  /** Workers a new connection may go to: accepting ones, else those not released yet. */
  private targets(): Worker[] {
    const live = [...this.workers].filter(([w]) => w.isConnected());
    const accepting = live.filter(([, s]) => s === 'accepting');
    return (accepting.length > 0 ? accepting : live.filter(([, s]) => s === 'stopping')).map(([w]) => w);
  }

  private dispatch(socket: Socket): void {
    // The plug is back: nobody can be queued behind it, the listener is closed now.
    if (this.plug?.isPlug(socket)) {
      socket.destroy();
      return;
    }
    this.handOn(socket);
  }

  private handOn(socket: Socket): void {
    const targets = this.targets();
    if (targets.length === 0) {
      if (this.closed || this.queue.length >= this.maxQueued) this.drop(socket, 'no worker');
      else {
        this.queue.push(socket);
        socket.once('close', () => {
          const i = this.queue.indexOf(socket);
          if (i >= 0) this.queue.splice(i, 1);
        });
      }
      return;
    }
    const worker = targets[this.turn++ % targets.length] as Worker;
    this.send(worker, { sy: 'conn', service: this.service }, socket);
  }

  private flush(): void {
    while (this.queue.length > 0 && this.targets().length > 0) this.handOn(this.queue.shift() as Socket);
  }

  /**
   * Tells the stopping workers that nothing more comes, once that is true: the primary no longer
   * accepts, or another worker takes the new connections.
   */
  private releaseStopping(): void {
    const othersAccept = (w: Worker) =>
      [...this.workers].some(([o, s]) => o !== w && s === 'accepting' && o.isConnected());
    for (const [worker, state] of this.workers) {
      if (state !== 'stopping') continue;
      if (!this.closed && !othersAccept(worker)) continue;
      this.workers.set(worker, 'released');
      // On the same channel after every connection sent to it: it arrives after them.
      this.send(worker, { sy: 'no-more', service: this.service });
    }
  }

  private send(worker: Worker, message: ConnectionMessage, socket?: Socket): void {
    if (!worker.isConnected()) {
      if (socket) this.drop(socket, 'worker gone');
      return;
    }
    try {
      worker.send(message, socket, (err) => {
        if (err && socket) this.drop(socket, 'send failed');
      });
    } catch {
      if (socket) this.drop(socket, 'send failed');
    }
  }

  private drop(socket: Socket, reason: string): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + 1;
    socket.destroy();
  }
}

/**
 * A worker's side: one connection source per service, fed by the primary's `conn` messages.
 * `receive` takes every message from the primary and says whether it was one of these.
 */
export function handedConnections(
  ports: number[],
  send: (m: ConnectionMessage) => void,
): { sources: ConnectionSource[]; receive(m: unknown, handle: unknown): boolean; primaryGone(): void } {
  const entries = ports.map((port, service) => {
    let server: Server | undefined;
    let open = 0;
    let stopped: Promise<void> | undefined;
    let released = false;
    let release = () => {
      released = true;
    };
    const source: ConnectionSource = {
      port,
      attach(s) {
        server = s;
        // It never listens: without this, no header deadline and no idle-connection closing.
        startConnectionChecks(s, s.headersTimeout);
      },
      stop() {
        stopped ??= new Promise<void>((resolve) => {
          if (released) return resolve();
          release = resolve;
          send({ sy: 'stop-accepting', service });
        });
        return stopped;
      },
    };
    const deliver = (socket: Socket) => {
      // What net.Server does on accept: over `maxConnections` the connection is dropped at once.
      if (!server || open >= server.maxConnections) {
        socket.destroy();
        server?.emit('drop', { remoteAddress: socket.remoteAddress, remotePort: socket.remotePort });
        return;
      }
      open++;
      socket.once('close', () => {
        open--;
      });
      server.emit('connection', socket);
    };
    return { source, deliver, release: () => release() };
  });
  return {
    sources: entries.map((e) => e.source),
    receive(m, handle) {
      if (typeof m !== 'object' || m === null) return false;
      const { sy, service } = m as { sy?: unknown; service?: unknown };
      const entry = typeof service === 'number' ? entries[service] : undefined;
      if (sy === 'conn') {
        if (entry) entry.deliver(handle as Socket);
        else (handle as Socket | undefined)?.destroy();
        return true;
      }
      if (sy === 'no-more') {
        entry?.release();
        return true;
      }
      return false;
    },
    primaryGone() {
      for (const e of entries) e.release();
    },
  };
}
