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
 * The plug: the process connects to its own listener, and in the next tick (right after the
 * plug's connect(2), during which a loopback handshake completes, so the plug is queued) lowers
 * the queue's bound to 0. A bound of 0 admits a new connection only into an empty queue: from
 * then on every client SYN is dropped (the client retries it after a second, finds the port
 * closed: ECONNREFUSED, nothing sent). The clients queued ahead of the plug are accepted and
 * served as usual; when the plug itself is accepted nobody is queued behind it, and the caller
 * closes the listener in that same callback, before any client can complete a handshake.
 * (A client that completed one in the tick between the connect and the lowered bound would be
 * queued behind the plug and reset: microseconds. Asking the kernel whether the queue is empty,
 * /proc/net/tcp, takes milliseconds, a longer window than the one it would close.)
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

export interface PlugClose {
  /**
   * Whether an accepted connection (a socket, or what Node's 'drop' event says of one) is the
   * plug: if so `close` is called now, and the caller passes the connection on no further (and
   * destroys it).
   */
  isPlug(peer: { remoteAddress?: string; remotePort?: number }): boolean;
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
  close: () => void,
  waitMs = plugWaitMs,
): PlugClose | undefined {
  const handle = (server as Server & { _handle?: { listen?(backlog: number): number } | null })._handle;
  const address = server.address();
  if (process.platform !== 'linux' || typeof handle?.listen !== 'function' || address === null) return undefined;
  if (typeof address === 'string') return undefined;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    plug.destroy();
    close();
  };
  const local = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const plug = connect({ host: local, port: address.port });
  plug.on('error', finish);
  // Queued after Node's own next-tick connect(2) of the plug: runs right after it.
  process.nextTick(() => handle.listen?.(0));
  const timer = setTimeout(finish, Math.max(0, waitMs)).unref();
  return {
    isPlug(peer) {
      if (done || plug.localPort === undefined) return false;
      if (peer.remotePort !== plug.localPort || peer.remoteAddress !== plug.localAddress) return false;
      finish();
      return true;
    },
  };
}
