/**
 * Closing a listener without resetting the connections in its accept queue.
 *
 * A client's connection is established once the kernel completes the handshake, before the
 * service accepts it, and the client sends its request at once. Closing the listening socket
 * resets every connection still in the kernel's accept queue (Linux), requests included. Node 20's
 * libuv (≥ 1.45, libuv/libuv#3696) accepts one connection per event-loop turn, so on a busy service
 * a burst of new connections waits there for hundreds of milliseconds (issue 16: 5-23 resets in
 * test/services/graceful-stop.test.ts, all requests sent well before the SIGTERM).
 *
 * So a stop first shrinks the queue's bound to 0 (the kernel lets almost no new connection in:
 * a late client's SYN goes unanswered, its retry finds the port closed, ECONNREFUSED), then keeps
 * accepting, one per turn, until the queue is empty, and only then closes. On Linux "empty" is
 * known by a plug (plug-close.ts): the service's own connection, queued behind the clients, whose
 * accept means nobody waits behind it and nobody can get in before the close. (Before the plug,
 * the kernel's count of the queue was read from /proc/net/tcp and the listener closed when it was
 * 0; clients reconnecting at once got into the emptied queue during that read: 1 reset in 2 runs
 * of the single-process test/services/graceful-stop.test.ts.) Elsewhere: until a turn accepted none.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import type { AddressInfo, Server, Socket } from 'node:net';
import { closeBehindPlug } from './plug-close.ts';

/** The libuv handle under a listening net.Server (Node-internal: `listen` re-runs listen(2)). */
interface ListenHandle {
  listen?(backlog: number): number;
}

/**
 * Resolves once `server` accepted every connection waiting in its accept queue (one event-loop
 * turn without a new one), or at `deadline` (Date.now() ms), with how many it accepted meanwhile
 * (through the server's usual 'connection' listeners), how many were queued at the start (when
 * known) and how long it took.
 */
export async function drainAcceptQueue(
  server: Server,
  deadline: number,
): Promise<{ accepted: number; queued: number | undefined; ms: number; plug?: boolean; plug_window_ms?: number }> {
  const started = Date.now();
  const queuedAtStart = acceptQueueLength(server);
  const behindPlug = await drainBehindPlug(server, deadline);
  if (behindPlug) {
    const { accepted, windowMs } = behindPlug;
    return { accepted, queued: queuedAtStart, ms: Date.now() - started, plug: true, plug_window_ms: windowMs };
  }
  // Nothing queued: close at once, as a client that connects from now on is too late (every turn
  // kept open lets in one more that could meet the close).
  if (queuedAtStart === 0) return { accepted: 0, queued: 0, ms: 0 };
  const handle = (server as Server & { _handle?: ListenHandle | null })._handle;
  // listen(2) on a listening socket only changes its bound; a failure leaves the old one.
  handle?.listen?.(0);
  let accepted = 0;
  const count = () => {
    accepted++;
  };
  server.on('connection', count);
  // Refused over max_connections: accepted, then closed by Node, still taken off the queue.
  server.on('drop', count);
  try {
    // Each setImmediate runs after one poll phase, where libuv accepts one queued connection.
    await nextTurn();
    while (Date.now() < deadline) {
      const before = accepted;
      await nextTurn();
      // Read right before the caller closes (nothing is awaited in between but microtasks): a
      // connection completing while this turn ran its callbacks is not missed.
      const queued = acceptQueueLength(server);
      if (queued === 0 || (queued === undefined && accepted === before)) break;
    }
  } finally {
    server.off('connection', count);
    server.off('drop', count);
  }
  return { accepted, queued: queuedAtStart, ms: Date.now() - started };
}

/**
 * Connections waiting in `server`'s accept queue, from the kernel (Linux: /proc/net/tcp lists a
 * listening socket's queue as its rx_queue); undefined where that cannot be read. Called a few
 * times per stop only: it reads the table of every TCP socket.
 */
export function acceptQueueLength(server: Server): number | undefined {
  const fd = (server as Server & { _handle?: { fd?: number } | null })._handle?.fd;
  if (fd === undefined || fd < 0 || process.platform !== 'linux') return undefined;
  try {
    const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`))?.[1];
    if (!inode) return undefined;
    for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
      for (const line of readFileSync(table, 'latin1').split('\n')) {
        const fields = line.trim().split(/\s+/);
        // sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
        if (fields[9] === inode && fields[3] === '0A') return Number.parseInt(fields[4]?.split(':')[1] ?? '', 16);
      }
    }
  } catch {
    // No /proc (a sandbox): fall back to counting accepts.
  }
  return undefined;
}

/**
 * Accepts until the plug comes back (plug-close.ts), at the latest at `deadline`; resolves with
 * how many connections were accepted meanwhile (through the server's usual 'connection'
 * listeners), or undefined where there is no plug (not Linux): the caller drains otherwise.
 * Resolved from the callback that accepted the plug: the caller closes before the next accept.
 */
function drainBehindPlug(
  server: Server,
  deadline: number,
): Promise<{ accepted: number; windowMs: number | undefined }> | undefined {
  const address = server.address() as AddressInfo | string | null;
  if (address === null || typeof address === 'string') return undefined;
  let accepted = 0;
  let resolveDone: (() => void) | undefined;
  const done = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  const plug = closeBehindPlug(server, address.address, () => resolveDone?.(), deadline - Date.now());
  if (!plug) return undefined;
  // First among the listeners: the plug is taken out before anything serves it.
  const onConnection = (socket: Socket) => {
    if (plug.isPlug(socket)) socket.destroy();
    else accepted++;
  };
  // Refused over max_connections: accepted, then closed by Node, still taken off the queue.
  const onDrop = (peer?: { remoteAddress?: string; remotePort?: number }) => {
    if (!peer || !plug.isPlug(peer)) accepted++;
  };
  server.prependListener('connection', onConnection);
  server.on('drop', onDrop);
  return done.then(() => {
    server.off('connection', onConnection);
    server.off('drop', onDrop);
    return { accepted, windowMs: plug.windowMs };
  });
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
