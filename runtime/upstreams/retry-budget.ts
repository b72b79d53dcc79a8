/**
 * A retry budget, as Envoy's: retries under way at once are at most `percent` of the upstream's
 * live requests, and never fewer than `min_concurrency` (so a quiet upstream may still retry).
 * When every endpoint fails, each request would otherwise multiply into `attempts` requests just
 * when the upstream can least take them; with the budget, an outage costs at most that share more.
 * A retry holds its place from the decision (its backoff included) until its try ends.
 */
export class RetryBudget {
  /** Requests under way on the upstream (until their answer's body ends, or they fail). */
  live = 0;
  /** Retries under way (waiting for their backoff, or sent and not answered yet). */
  retrying = 0;

  constructor(
    private readonly percent: number,
    private readonly minConcurrency: number,
  ) {}

  allowed(): number {
    return Math.max(this.minConcurrency, Math.floor((this.live * this.percent) / 100));
  }

  /** Takes a place for one retry; false when the budget is spent (the try's outcome stands). */
  take(): boolean {
    if (this.retrying >= this.allowed()) return false;
    this.retrying++;
    return true;
  }

  release(): void {
    this.retrying--;
  }
}
