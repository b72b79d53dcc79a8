/**
 * The cluster's IPC protocol: the messages the primary and its workers exchange over the
 * node:cluster channel (`sy` tells them from Node's own), and request/reply calls on it — the
 * primary asks a worker for its status, health, metrics or a reload; a worker asks the primary to
 * reload a service everywhere. The main listeners' connections travel on the same channel
 * (runtime/cluster-connections.ts).
 */
import type { ConnectionMessage } from '../cluster-connections.ts';

export type Op = 'status' | 'reload' | 'health' | 'metrics' | 'reload-all';

export type Message =
  | { sy: 'request'; id: number; op: Op; service: number }
  | { sy: 'reply'; id: number; value?: unknown; error?: string }
  | { sy: 'ready'; services: Array<{ name: string; ports: Record<string, number | undefined> }> }
  | { sy: 'failed'; error: string }
  | { sy: 'shutdown' }
  | ConnectionMessage;

/** Environment variable telling a worker the main listeners' ports (JSON array, in file order). */
export const mainPortsVariable = 'SWITCHYARD_CLUSTER_MAIN_PORTS';

const callTimeoutMs: Record<Op, number> = {
  status: 5000,
  health: 10000,
  metrics: 5000,
  reload: 120000,
  'reload-all': 120000,
};

export function isMessage(m: unknown): m is Message {
  return typeof m === 'object' && m !== null && typeof (m as { sy?: unknown }).sy === 'string';
}

/** Request/reply calls over one IPC channel. */
export class Calls {
  private next = 1;
  private pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();

  call(send: (m: Message) => void, op: Op, service: number): Promise<unknown> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${op} got no answer within ${callTimeoutMs[op]} ms`));
      }, callTimeoutMs[op]);
      this.pending.set(id, { resolve, reject, timer });
      try {
        send({ sy: 'request', id, op, service });
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err as Error);
      }
    });
  }

  settle(m: Extract<Message, { sy: 'reply' }>): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.error !== undefined) p.reject(new Error(m.error));
    else p.resolve(m.value);
  }

  failAll(reason: string): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new Error(reason));
      this.pending.delete(id);
    }
  }
}

/** Answers a request with `work`'s result, or its error message. */
export async function reply(send: (m: Message) => void, id: number, work: () => unknown): Promise<void> {
  try {
    send({ sy: 'reply', id, value: await work() });
  } catch (err) {
    send({ sy: 'reply', id, error: (err as Error).message });
  }
}
