/**
 * Closing a busy listening socket without resetting a connection in its kernel accept queue.
 *
 * Closing a listening socket resets every connection still in its accept queue, requests
 * included. Clients that reconnect at once (every answer of a stopping service says
 * `Connection: close`) keep that queue filled while the process accepts one connection per
 * event-loop turn, so there is always someone to reset (issue 29: 1–18 ECONNRESET per SIGTERM to
 * a cluster's primary). Waiting until the kernel reports the queue empty does not help: the next
 * client enters it at once.
 *
 * The plug: the process connects to its own listener twice (the plug, then its guard), and in
 * the next tick (right after both connect(2) calls, during which a loopback handshake completes,
 * so both are queued) lowers the queue's bound to 0. A bound of 0 admits a new connection only
 * into an empty queue: from then on every client SYN is dropped (the client retries it after a
 * second, finds the port closed: ECONNREFUSED, nothing sent). The clients queued ahead of the
 * plug are accepted and served as usual; when the plug itself is accepted only its guard is
 * queued behind it (the queue stays full: still no client gets in), and the caller closes the
 * listener in that same callback, before the next accept: the close resets the guard alone.
 * Without the guard the queue was empty from the plug's accept to the close, and a client that
 * reconnected then (answered by a cluster worker meanwhile, or while the process was preempted)
 * was admitted and reset: the one residual reset per ~8 cluster stops of issue 29.
 * (A client that completes a handshake in the microseconds between the plug's connect and the
 * lowered bound is still queued behind the plug and reset. Asking the kernel whether the queue
 * is empty, /proc/net/tcp, takes milliseconds, a longer window than the one it would close.)
 *
 * Measured with a listener that spends 2 ms per accept and 64–128 reconnecting clients: closed at
 * once, 61–125 resets per close; behind the plug, 0 in 8 runs (test/runtime/plug-close.test.ts).
 * Linux only (where the bound of 0 behaves so, and where Node's listen handle can re-listen).
 * Used by a cluster's primary (cluster-connections.ts) and by every listener of a service that
 * stops (accept-backlog.ts).
 */
import { connect, type Server } from 'node:net';

/** The longest a close waits for its plug before closing anyway (unless the caller says). */
const plugWaitMs = 2000;

/** How a close behind a plug came to close: its plug accepted (nobody reset), the plug's connection failed, or the wait ran out. */
export type PlugOutcome = 'plug accepted' | 'plug failed' | 'plug wait over';

export interface PlugClose {
  /**
   * Whether an accepted connection (a socket, or what Node's 'drop' event says of one) is the
   * plug: if so `close` is called now, and the caller passes the connection on no further (and
   * destroys it).
   */
  isPlug(peer: { remoteAddress?: string; remotePort?: number }): boolean;
  /**
   * How long (ms) from the plug's connect(2) to the lowered bound, once lowered: a client whose
   * handshake completed within it is queued behind the plug and reset by the close. Tens of
   * microseconds (the guard's connect) unless the process was descheduled meanwhile (a loaded
   * machine); logged by the callers.
   */
  readonly windowMs: number | undefined;
}

/**
 * Starts closing `server` (listening on `host`) behind a plug; `close` is called once: when the
 * caller's connection handler sees the plug (`isPlug`), when the plug fails, or after `plugWaitMs`. Returns
 * undefined where the plug cannot work (not Linux, no re-listen): then close at once. `host`: the
 * address the server listens on (every interface: the plug comes over loopback).
 */
export function closeBehindPlug(
  server: Server,
  host: string,
  close: (how: PlugOutcome) => void,
  waitMs = plugWaitMs,
): PlugClose | undefined {
  const handle = (server as Server & { _handle?: { listen?(backlog: number): number } | null })._handle;
  const address = server.address();
  if (process.platform !== 'linux' || typeof handle?.listen !== 'function' || address === null) return undefined;
  if (typeof address === 'string') return undefined;
  let done = false;
  /** The plug's and the guard's addresses, as an accepted peer shows them (kept past their close). */
  const ours = new Set<string>();
  const remember = () => {
    for (const s of [plug, guard]) if (s.localPort !== undefined) ours.add(`${s.localAddress}:${s.localPort}`);
  };
  const finish = (how: PlugOutcome) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    remember();
    plug.destroy();
    guard.destroy();
    close(how);
  };
  const local = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  let windowMs: number | undefined;
  let plugConnectedAt = 0;
  const plug = connect({ host: local, port: address.port });
  // Runs right after Node's next-tick connect(2) of the plug: where the window opens.
  process.nextTick(() => {
    plugConnectedAt = performance.now();
  });
  plug.on('error', () => finish('plug failed'));
  // Keeps the queue full once the plug is taken; the close resets it, as it should.
  const guard = connect({ host: local, port: address.port });
  guard.on('error', () => {});
  // Queued after Node's own next-tick connect(2) of both: runs right after them.
  process.nextTick(() => {
    handle.listen?.(0);
    windowMs = performance.now() - plugConnectedAt;
  });
  const timer = setTimeout(() => finish('plug wait over'), Math.max(0, waitMs)).unref();
  return {
    get windowMs() {
      return windowMs;
    },
    isPlug(peer) {
      if (!done) remember();
      if (!ours.has(`${peer.remoteAddress}:${peer.remotePort}`)) return false;
      // The first of the two accepted: nobody is queued ahead of it, the other one (if it got in)
      // holds the queue full behind it.
      finish('plug accepted');
      return true;
    },
  };
}
