/**
 * Connected / disconnected state of an upstream, with the reason when it is down, and waiters for
 * `ready()`. Transitions are logged once, not on every probe.
 */
import type { Logger } from 'pino';

const NOT_CHECKED = 'not checked yet';

export class Readiness {
  connected = false;
  error: string | undefined = NOT_CHECKED;
  private waiters = new Set<() => void>();
  /** Woken by the first outcome of a check, up or down. */
  private checkWaiters = new Set<() => void>();

  constructor(
    private readonly name: string,
    private readonly logger: Logger,
  ) {}

  up(): void {
    if (this.connected) return; // the common case: called on every successful request
    this.logger.info(`upstream "${this.name}" connected`);
    this.connected = true;
    this.error = undefined;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
    this.wakeChecked();
  }

  down(error: string): void {
    if (this.connected) this.logger.warn({ reason: error }, `upstream "${this.name}" disconnected`);
    this.connected = false;
    this.error = error;
    this.wakeChecked();
  }

  /** Resolves when a check has had an outcome (up or down), or after `timeoutMs` regardless. */
  waitChecked(timeoutMs: number): Promise<void> {
    if (this.connected || this.error !== NOT_CHECKED) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.checkWaiters.delete(wake);
        resolve();
      }, timeoutMs);
      this.checkWaiters.add(wake);
    });
  }

  private wakeChecked(): void {
    for (const wake of this.checkWaiters) wake();
    this.checkWaiters.clear();
  }

  /** Resolves when connected; rejects after `timeoutMs` with the last known reason. */
  wait(timeoutMs: number): Promise<void> {
    if (this.connected) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(wake);
        reject(new Error(`upstream "${this.name}" not ready after ${timeoutMs} ms: ${this.error ?? 'unknown'}`));
      }, timeoutMs);
      this.waiters.add(wake);
    });
  }
}
