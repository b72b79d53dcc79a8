/**
 * The replica side: follows a primary's change feed and applies each change to the local entity
 * store in `seq` order. Idempotent by construction: the store skips a change at or below the last
 * applied seq (kept in the same transaction as the change), so a replica stopped at any point and
 * restarted resumes from where it stopped, losing nothing and applying nothing twice.
 */
import { request } from 'undici';
import type { ChangeRecord, EntityStore } from '../../runtime/index.ts';

export interface FollowerOptions {
  store: EntityStore;
  /** `http://host:port` of the primary's feed. */
  primary: string;
  token?: string;
  batch: number;
  waitMs: number;
  onError(err: Error): void;
}

export interface FollowerState {
  connected: boolean;
  lastApplied: number;
  primaryLastSeq: number;
  /** When the primary's newest change was applied here (0: not caught up / never). */
  lagSeconds: number;
  lastError?: string;
  applied: number;
}

export class Follower {
  readonly state: FollowerState = { connected: false, lastApplied: 0, primaryLastSeq: 0, lagSeconds: 0, applied: 0 };
  #stopped = false;
  #abort = new AbortController();
  #loop: Promise<void> | undefined;

  constructor(private readonly options: FollowerOptions) {}

  start(): void {
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const { store } = this.options;
    let backoff = 250;
    this.state.lastApplied = await store.lastSeq().catch(() => 0);
    while (!this.#stopped) {
      try {
        const { changes, last_seq } = await this.#fetch(this.state.lastApplied);
        for (const change of changes) {
          if (this.#stopped) return;
          if ((await store.applyChange(change)) === 'applied') this.state.applied++;
          this.state.lastApplied = change.seq;
        }
        this.state.connected = true;
        this.state.lastError = undefined;
        this.state.primaryLastSeq = Math.max(last_seq, this.state.lastApplied);
        const newest = changes.at(-1);
        // Lag: how old the newest applied change is while behind; 0 once caught up.
        this.state.lagSeconds =
          this.state.lastApplied >= this.state.primaryLastSeq
            ? 0
            : newest
              ? Math.max(0, (Date.now() - Date.parse(newest.at)) / 1000)
              : this.state.lagSeconds;
        backoff = 250;
      } catch (err) {
        if (this.#stopped) return;
        this.state.connected = false;
        this.state.lastError = (err as Error).message;
        this.options.onError(err as Error);
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  async #fetch(after: number): Promise<{ changes: ChangeRecord[]; last_seq: number }> {
    const { primary, token, batch, waitMs } = this.options;
    const url = `${primary}/v1/changes?after=${after}&limit=${batch}&wait_ms=${waitMs}`;
    const res = await request(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: this.#abort.signal,
      headersTimeout: waitMs + 10_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`primary answered ${res.statusCode}: ${text.slice(0, 200)}`);
    const body = JSON.parse(text) as { changes?: ChangeRecord[]; last_seq?: number };
    if (!Array.isArray(body.changes) || typeof body.last_seq !== 'number')
      throw new Error('primary sent no change list');
    return { changes: body.changes, last_seq: body.last_seq };
  }
}
