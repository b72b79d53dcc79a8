/**
 * Cancels an upstream request when the client goes away. undici accepts an EventEmitter with an
 * `aborted` flag as a request signal; this costs far less per request than an AbortController
 * (an EventTarget, whose abort() also builds a DOMException with a stack trace), and watching a
 * response allocates no closure.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';

const watcher = Symbol('client abort');
type Watched = ServerResponse & { [watcher]?: ClientAbort };

/** A 'close' listener shared by every watched response (`this` is the response). */
function onResponseClose(this: Watched): void {
  if (!this.writableFinished) this[watcher]?.abort();
}

export class ClientAbort extends EventEmitter {
  aborted = false;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }

  /**
   * Aborts when `res` closes before it finished (the client disconnected). Undo with unwatch(),
   * or leave it for the response's life. A response watched already gives its signal again.
   */
  static watch(res: ServerResponse): ClientAbort {
    const watched = (res as Watched)[watcher];
    if (watched) return watched;
    const signal = new ClientAbort();
    (res as Watched)[watcher] = signal;
    // `on`, not `once`: a response closes once, and `once` would wrap the listener per response.
    res.on('close', onResponseClose);
    return signal;
  }

  static unwatch(res: ServerResponse): void {
    res.off('close', onResponseClose);
    (res as Watched)[watcher] = undefined;
  }
}
