/**
 * Resource subscriptions of clients sharing one server session (`sessions: shared`). The server
 * keeps one set of subscribed URIs for all of them, so a client's `resources/unsubscribe` would
 * end the subscription of every other client on that URI. Here each URI counts its subscribers:
 * the server sees a subscribe when the first client subscribes and an unsubscribe when the last
 * one leaves (or its session ends); a client unsubscribing a URI it never subscribed changes
 * nothing. The other calls are answered here with the empty result the server would give.
 */

type Message = Record<string, unknown>;

/** What to do with a subscribe/unsubscribe: send it to the server, or answer `{}` here. */
export type SubscriptionStep = 'forward' | 'answer';

export class SharedSubscriptions {
  private readonly byUri = new Map<string, Set<string>>();

  /** `owner`: the client session; undefined for a message that is not a subscription call. */
  step(message: Message, owner: string): SubscriptionStep | undefined {
    const method = message.method;
    if (method !== 'resources/subscribe' && method !== 'resources/unsubscribe') return undefined;
    const uri = (message.params as { uri?: unknown } | undefined)?.uri;
    if (typeof uri !== 'string') return 'forward'; // malformed: the server answers its own error
    const owners = this.byUri.get(uri);
    if (method === 'resources/subscribe') {
      if (owners) {
        owners.add(owner);
        return 'answer';
      }
      this.byUri.set(uri, new Set([owner]));
      return 'forward';
    }
    if (!owners?.delete(owner)) return 'answer'; // not this client's subscription
    if (owners.size > 0) return 'answer';
    this.byUri.delete(uri);
    return 'forward';
  }

  /** A session ended: the URIs nobody subscribes to any more (to unsubscribe at the server). */
  release(owner: string): string[] {
    const orphaned: string[] = [];
    for (const [uri, owners] of this.byUri) {
      if (!owners.delete(owner) || owners.size > 0) continue;
      this.byUri.delete(uri);
      orphaned.push(uri);
    }
    return orphaned;
  }
}
