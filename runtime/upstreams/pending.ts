/**
 * In-flight JSON-RPC calls over one shared channel (a child's stdin/stdout). Each call gets a
 * fresh wire id so that concurrent callers using the same ids never collide; the caller's own id
 * is put back on the response.
 */
import { GatewayError } from '../errors.ts';
import type { JsonRpcId } from '../state.ts';
import type { ClientAbort } from '../util/client-abort.ts';

type Message = Record<string, unknown>;

interface Pending {
  callerId: JsonRpcId;
  ownerKey?: string;
  resolve(message: Message): void;
  reject(err: unknown): void;
  cleanup(): void;
}

export interface AddOptions {
  timeoutMs: number;
  /** An AbortSignal, or the cheaper ClientAbort (runtime/util/client-abort.ts). */
  signal?: AbortSignal | ClientAbort;
  /** Called with the wire id when the call times out or is aborted (to send a cancellation). */
  onGiveUp?(wireId: number): void;
  /**
   * The client session the call belongs to: a notification from that session naming the caller's
   * id (`notifications/cancelled`) is translated to this wire id, and one from any other is not.
   */
  owner?: string;
}

export class PendingCalls {
  private nextId = 1;
  private readonly calls = new Map<string, Pending>();
  /** (owner, caller id) -> wire id of that owner's call in flight. */
  private readonly owned = new Map<string, number>();

  constructor(private readonly upstream: string) {}

  get size(): number {
    return this.calls.size;
  }

  /** Registers a call; returns the wire id to send and the promise of its response. */
  add(callerId: JsonRpcId, options: AddOptions): { wireId: number; response: Promise<Message> } {
    const wireId = this.nextId++;
    const key = String(wireId);
    const response = new Promise<Message>((resolve, reject) => {
      const giveUp = (err: GatewayError) => {
        const call = this.calls.get(key);
        if (!call) return;
        this.forget(key, call);
        cleanup();
        options.onGiveUp?.(wireId);
        reject(err);
      };
      const timer = setTimeout(
        () =>
          giveUp(
            new GatewayError('upstream_timeout', `Upstream did not answer within ${options.timeoutMs} ms`, {
              details: { upstream: this.upstream, timeout_ms: options.timeoutMs },
            }),
          ),
        options.timeoutMs,
      );
      const onAbort = () => giveUp(new GatewayError('bad_request', 'Request aborted by the client'));
      const signal = options.signal;
      if (signal) {
        if (isAbortSignal(signal)) signal.addEventListener('abort', onAbort, { once: true });
        else signal.on('abort', onAbort);
      }
      const cleanup = () => {
        clearTimeout(timer);
        if (!signal) return;
        if (isAbortSignal(signal)) signal.removeEventListener('abort', onAbort);
        else signal.off('abort', onAbort);
      };
      const ownerKey = options.owner === undefined ? undefined : ownedKey(options.owner, callerId);
      if (ownerKey !== undefined) this.owned.set(ownerKey, wireId);
      this.calls.set(key, { callerId, ownerKey, resolve, reject, cleanup });
      if (options.signal?.aborted) onAbort();
    });
    return { wireId, response };
  }

  /** Settles the call a response belongs to; false when no call waits for it. */
  settle(message: Message): boolean {
    const key = String(message.id);
    const call = this.calls.get(key);
    if (!call) return false;
    this.forget(key, call);
    call.cleanup();
    call.resolve({ ...message, id: call.callerId });
    return true;
  }

  rejectAll(err: unknown): void {
    const calls = [...this.calls.values()];
    this.calls.clear();
    this.owned.clear();
    for (const call of calls) {
      call.cleanup();
      call.reject(err);
    }
  }

  /** The wire id of `owner`'s call `callerId` still in flight, if there is one. */
  wireIdOf(owner: string, callerId: unknown): number | undefined {
    if (typeof callerId !== 'string' && typeof callerId !== 'number') return undefined;
    return this.owned.get(ownedKey(owner, callerId));
  }

  private forget(key: string, call: Pending): void {
    this.calls.delete(key);
    // Only if it still names this call (a later call of the owner may have reused the id).
    if (call.ownerKey !== undefined && this.owned.get(call.ownerKey) === Number(key)) this.owned.delete(call.ownerKey);
  }
}

/** Numbers and strings are distinct ids (1 is not "1"). */
function ownedKey(owner: string, callerId: JsonRpcId): string {
  return `${owner}\u0000${typeof callerId}:${String(callerId)}`;
}

function isAbortSignal(signal: AbortSignal | ClientAbort): signal is AbortSignal {
  return typeof (signal as AbortSignal).addEventListener === 'function';
}
