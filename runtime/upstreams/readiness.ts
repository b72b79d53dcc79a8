/**
 * Connected / disconnected state of an upstream, with the reason when it is down, and waiters for
 * `ready()`. Transitions are logged once, not on every probe.
 */
import type { Logger } from 'pino';

export class Readiness {
  connected = false;
  error: string | undefined = 'not checked yet';
  private waiters = new Set<() => void>();

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
  }

  down(error: string): void {
    if (this.connected) this.logger.warn({ reason: error }, `upstream "${this.name}" disconnected`);
    this.connected = false;
    this.error = error;
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
