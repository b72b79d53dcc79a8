/**
 * Header deadlines checked after the event loop has read its sockets.
 *
 * Node closes a connection whose request headers are not complete `headersTimeout` after it was
 * accepted (or after a later request's first byte) with a 408, from a timer. Timers run at the
 * start of an event-loop turn, before the turn reads the sockets: after the loop was busy for
 * longer than the deadline (a long collection, a starved process, a burst of requests), every
 * connection accepted before the stall whose request sat unread in the kernel's buffer was
 * answered 408 as if its client had been a slowloris. Here the check waits for the turn's read phase (one `setImmediate`): what had arrived when
 * the timer fired is parsed first, and only a connection whose headers are still incomplete then
 * is closed, exactly as Node closes it. A real slowloris is closed at most one turn later.
 *
 * Node keeps its connection list under an internal symbol (`http.server.connections`, Node 18.x
 * on); when it is not there, Node's own check stays in place.
 */
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

/** Node's list of a server's connections (lib/_http_server.js, `ConnectionsList`). */
interface ConnectionsList {
  expired(headersTimeout: number, requestTimeout: number): Array<{ socket?: Socket | null }>;
}

const deferred = new WeakSet<object>();

/**
 * Makes `server`'s header-deadline check run after the next read phase. Call after Node set up
 * its connection checks (on 'listening'); calling again is harmless.
 */
export function checkHeadersAfterReads(server: Server | HttpsServer): boolean {
  const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connections');
  const list = key && ((server as unknown as Record<symbol, unknown>)[key] as ConnectionsList | undefined);
  if (!list || typeof list.expired !== 'function') return false;
  if (deferred.has(list)) return true;
  deferred.add(list);
  const expired = list.expired.bind(list);
  // Node's timer asks for the expired connections and closes them at once: it now gets none, and
  // the same question is asked again once the sockets have been read.
  list.expired = (headersTimeout, requestTimeout) => {
    setImmediate(() => {
      for (const parser of expired(headersTimeout, requestTimeout)) if (parser.socket) timedOut(parser.socket);
    });
    return [];
  };
  return true;
}

/** What Node does with an expired connection: its own 'error' handler answers 408 and closes it. */
function timedOut(socket: Socket): void {
  const err = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
  const nodeHandler = socket.listeners('error').find((f) => f.name === 'socketOnError');
  if (nodeHandler) {
    nodeHandler.call(socket, err);
    return;
  }
  // Not Node's HTTP socket as expected: close it the same way by hand.
  if (socket.writable) socket.write('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
  socket.destroy(err);
}
