/**
 * What a client's notification may do on an upstream channel other clients may share. A client
 * names requests by its own ids, which on the wire are ids the gateway chose: a cancellation is
 * translated to the wire id of that client's own call in flight, and dropped when it names none
 * (a guessed id would otherwise cancel another client's call). Progress notifications answer
 * server requests, which the gateway never relays to clients: none can name one of the client's.
 */

type Message = Record<string, unknown>;

export type ScopedNotification = { forward: Message } | { drop: string };

/** `wireIdOf(callerId)`: the wire id of this client's call with that id in flight, if any. */
export function scopeNotification(
  message: Message,
  wireIdOf: (callerId: unknown) => number | undefined,
): ScopedNotification {
  switch (message.method) {
    case 'notifications/cancelled': {
      const params = message.params;
      if (typeof params !== 'object' || params === null || Array.isArray(params)) {
        return { drop: 'cancellation without params' };
      }
      const wireId = wireIdOf((params as Message).requestId);
      if (wireId === undefined) return { drop: 'cancellation names no request of this client in flight' };
      return { forward: { ...message, params: { ...params, requestId: wireId } } };
    }
    case 'notifications/progress':
      return { drop: 'progress names no request the gateway relayed to this client' };
    default:
      return { forward: message };
  }
}
