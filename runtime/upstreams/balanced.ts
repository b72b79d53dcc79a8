/**
 * An `http` / `openai` upstream with several endpoints: one HttpUpstreamImpl per endpoint (each
 * with its pool and background probe), a picker (round-robin or least-request), passive outlier
 * ejection, and retries on another endpoint. To the stages it is one upstream with the same
 * contract as a single-URL one (a single URL with `retry:` is run as one endpoint of it).
 *
 * Retries are only where they are safe (runtime/upstreams/retry.ts decides which), with a body
 * that can be sent again (a buffer, a string or none, not a stream), within the retry budget
 * (retry-budget.ts) and the request's overall timeout. An answer is retried only on its status,
 * before any of its body went to the caller; once an answer is returned it is the client's.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import { whenAnswerEnds } from './answer-handler.ts';
import { balancingDefaults, type HttpUpstreamConfig, httpDefaults, type ResolvedBalancing } from './config.ts';
import { dropUpstreamAnswer } from './drop-answer.ts';
import { EndpointHealth, type EndpointState, OutlierDetector } from './endpoint-health.ts';
import { type EndpointMetrics, endpointMetrics } from './endpoint-metrics.ts';
import { HttpUpstreamImpl } from './http.ts';
import { isUnreachable, timeoutError } from './http-errors.ts';
import { createPicker, type Picker } from './picker.ts';
import {
  backoffMs,
  isIdempotent,
  isReplayable,
  pause,
  type ResolvedRetry,
  resolveRetry,
  retryAfterMs,
  retryReasonForAnswer,
  retryReasonForError,
} from './retry.ts';
import { RetryBudget } from './retry-budget.ts';
import type { HttpForwardRequest, HttpForwardResponse, HttpUpstream, UpstreamHealth } from './types.ts';

export interface Endpoint {
  upstream: HttpUpstreamImpl;
  /** The metric label and the name in health: origin and path (never credentials). */
  label: string;
  weight: number;
  health: EndpointHealth;
}

export class BalancedHttpUpstream implements HttpUpstream {
  readonly url: URL;
  readonly endpoints: readonly Endpoint[];
  private readonly settings: ResolvedBalancing;
  private readonly picker: Picker;
  private readonly outliers: OutlierDetector;
  private readonly metrics: EndpointMetrics | undefined;
  private readonly all: readonly number[];
  private readonly retry: ResolvedRetry;
  private readonly budget: RetryBudget;
  /** The overall bound of one request (`timeout_ms`), unless the caller gives its own. */
  private readonly timeoutMs: number;
  /** `hash_on.header`, lower-cased as the forwarded headers are. */
  private readonly hashHeader: string | undefined;

  constructor(
    readonly name: string,
    config: HttpUpstreamConfig & { endpoints: NonNullable<HttpUpstreamConfig['endpoints']> },
    protected readonly logger: Logger,
    metrics?: MetricsKit,
  ) {
    this.settings = balancingDefaults(config);
    const { endpoints: list, balance, hash_on, outlier, retry, ...common } = config;
    this.retry = resolveRetry(retry);
    this.budget = new RetryBudget(this.retry.budgetPercent, this.retry.budgetMinConcurrency);
    this.timeoutMs = httpDefaults({ ...common, url: '' }).timeout_ms;
    this.endpoints = list.map((e) => {
      const upstream = new HttpUpstreamImpl(
        name,
        httpDefaults({ ...common, url: e.url }),
        logger.child({ endpoint: e.url }),
      );
      const label = upstream.url.origin + upstream.url.pathname;
      return { upstream, label, weight: e.weight ?? 1, health: new EndpointHealth() };
    });
    this.hashHeader = hash_on?.header.toLowerCase();
    this.url = (this.endpoints[0] as Endpoint).upstream.url;
    this.all = this.endpoints.map((_, i) => i);
    this.picker = createPicker(
      this.settings.balance,
      this.endpoints.map((e) => e.weight),
    );
    this.outliers = new OutlierDetector(
      this.settings.outlier,
      this.endpoints.map((e) => e.health),
    );
    this.metrics = metrics ? endpointMetrics(metrics, this) : undefined;
  }

  get kind(): HttpUpstream['kind'] {
    return (this.endpoints[0] as Endpoint).upstream.kind;
  }

  /** The first endpoint's resolution (endpoints are meant to share their base path). */
  resolvePath(path: string): string {
    return (this.endpoints[0] as Endpoint).upstream.resolvePath(path);
  }

  async forward(req: HttpForwardRequest): Promise<HttpForwardResponse> {
    const p = this.retry;
    const budget = this.budget;
    budget.live++; // until the answer's body ends, or the request fails
    // The whole request (every try and backoff) stays within the overall timeout.
    const overall = req.timeoutMs ?? this.timeoutMs;
    const started = performance.now();
    const replayable = isReplayable(req.body);
    const tried: number[] = [];
    /** This request holds a place in the retry budget (from the decision to retry until that try ends). */
    let retrying = false;
    try {
      for (let attempt = 1; ; attempt++) {
        const left = attempt === 1 ? overall : overall - (performance.now() - started);
        const perTry = p.perTryTimeoutMs;
        const tryMs = perTry !== undefined && perTry < left ? perTry : left;
        // The first try without a per-try bound is the request as it came (no copy on the fast path).
        const sent = attempt === 1 && tryMs === overall ? req : { ...req, timeoutMs: Math.max(1, Math.ceil(tryMs)) };
        const i = this.route(req, tried) ?? this.choose(tried, this.keyOf(req));
        const e = this.endpoints[i] as Endpoint;
        e.health.active++;
        let res: HttpForwardResponse;
        try {
          res = await e.upstream.forward(sent);
        } catch (err) {
          e.health.active--;
          if (retrying) {
            retrying = false;
            budget.release();
          }
          tried.push(i);
          if (isClientAbort(err)) throw err; // says nothing about the endpoint
          this.failed(i);
          const reason =
            replayable && attempt < p.attempts && !req.signal?.aborted
              ? retryReasonForError(p, err, isIdempotent(req))
              : undefined;
          if (reason === undefined || !(await this.retryAfter(reason, backoffMs(p, attempt), started, overall, req))) {
            // The overall deadline, not the try's own bound, ended it: say so.
            if (tryMs < left || !isTimeout(err)) throw err;
            throw timeoutError(this.name, overall, err);
          }
          retrying = true;
          continue;
        }
        if (retrying) {
          retrying = false;
          budget.release();
        }
        if (res.status >= 500) this.failed(i);
        else this.outliers.success(e.health);
        if (p.statuses.size > 0 && replayable && attempt < p.attempts) {
          const reason = retryReasonForAnswer(p, res.status, isIdempotent(req));
          const after = reason === undefined ? undefined : retryAfterMs(res);
          if (reason !== undefined && (after === undefined || after <= p.maxRetryAfterMs)) {
            const wait = Math.max(backoffMs(p, attempt), after ?? 0);
            if (await this.retryAfter(reason, wait, started, overall, req, () => this.letGo(res, e))) {
              tried.push(i);
              retrying = true;
              continue;
            }
          }
        }
        // One listener for the endpoint's and the budget's count: the answer is the client's now.
        whenAnswerEnds(res, () => {
          e.health.active--;
          budget.live--;
        });
        this.answered(i, req, res);
        return res;
      }
    } catch (err) {
      budget.live--;
      if (retrying) budget.release();
      throw err;
    }
  }

  /** An answer retried: its endpoint's count ends with its body, read to the end or dropped (retry.ts). */
  private letGo(res: HttpForwardResponse, e: Endpoint): void {
    whenAnswerEnds(res, () => e.health.active--);
    dropUpstreamAnswer(res);
  }

  /**
   * Takes a place in the retry budget and waits `waitMs` (its backoff, or the answer's
   * Retry-After); false, and nothing waited, when the budget is spent or the wait would leave the
   * next try less than `minTryMs` of the overall timeout. `letGo`: the answer being retried, let go of first.
   */
  private async retryAfter(
    reason: string,
    waitMs: number,
    started: number,
    overall: number,
    req: HttpForwardRequest,
    letGo?: () => void,
  ): Promise<boolean> {
    // A retry needs some of the overall timeout left after its wait (a try of a few ms only times out).
    if (overall - (performance.now() - started) - waitMs < minTryMs) return false;
    if (!this.budget.take()) {
      this.metrics?.budgetExhausted(this.name);
      return false;
    }
    letGo?.();
    this.metrics?.retried(this.name, reason);
    if (waitMs > 0) {
      try {
        await pause(waitMs, req.signal);
      } catch (err) {
        this.budget.release();
        throw err;
      }
    }
    return true;
  }

  health(): UpstreamHealth {
    const now = Date.now();
    this.refresh(now);
    const endpoints = this.endpoints.map((e) => {
      const h = e.upstream.health();
      return {
        url: e.label,
        weight: e.weight,
        state: this.stateOf(e, now),
        ...(h.error ? { error: h.error } : {}),
        ...(e.health.ejected(now) ? { ejected_for_ms: e.health.ejectedUntil - now } : {}),
        ejections: e.health.ejections,
        consecutive_failures: e.health.consecutiveFailures,
        active: e.health.active,
        check: e.upstream.checkStatus(),
      };
    });
    const connected = endpoints.some((e) => e.state === 'up');
    // Why, not where: `error` reaches public health answers; each endpoint's URL stays in `detail`.
    const reasons = [...new Set(endpoints.map((e) => e.error ?? e.state))];
    return {
      connected,
      ...(connected ? {} : { error: `no endpoint takes requests: ${reasons.join('; ')}` }),
      detail: {
        url: this.url.href,
        kind: this.kind,
        balance: this.settings.balance,
        ...(this.settings.hash_on ? { hash_on: this.settings.hash_on } : {}),
        endpoints,
      },
    };
  }

  /** Each endpoint's state for the metrics (`up`: it takes requests now) and its active check's verdict. */
  states(): Array<{ label: string; state: EndpointState; checkHealthy?: boolean }> {
    const now = Date.now();
    this.refresh(now);
    return this.endpoints.map((e) => ({
      label: e.label,
      state: this.stateOf(e, now),
      checkHealthy: e.upstream.checkStatus().healthy,
    }));
  }

  /** Usable once any endpoint is. */
  async ready(timeoutMs = 10000): Promise<void> {
    try {
      await Promise.any(this.endpoints.map((e) => e.upstream.ready(timeoutMs)));
    } catch {
      // For the operator's log: each endpoint by its URL.
      const now = Date.now();
      const why = this.endpoints.map((e) => `${e.label}: ${e.upstream.health().error ?? this.stateOf(e, now)}`);
      throw new Error(`upstream "${this.name}" not ready after ${timeoutMs} ms: ${why.join('; ')}`);
    }
  }

  async checked(timeoutMs: number): Promise<void> {
    await Promise.all(this.endpoints.map((e) => e.upstream.checked(timeoutMs)));
  }

  async close(): Promise<void> {
    this.metrics?.forget(this);
    await Promise.all(this.endpoints.map((e) => e.upstream.close()));
  }

  /**
   * An endpoint the request must go to (jsonrpc-balanced.ts: the one holding its MCP session), or
   * undefined to let the picker choose. May throw (that endpoint is out).
   */
  protected route(_req: HttpForwardRequest, _tried: readonly number[]): number | undefined {
    return undefined;
  }

  /** Sees each answer with the endpoint that gave it (jsonrpc-balanced.ts learns sessions from it). */
  protected answered(_i: number, _req: HttpForwardRequest, _res: HttpForwardResponse): void {}

  /** The value a consistent hash is keyed by (first value of a repeated header). */
  private keyOf(req: HttpForwardRequest): string | undefined {
    if (!this.hashHeader) return undefined;
    const v = req.headers[this.hashHeader];
    return Array.isArray(v) ? v[0] : v;
  }

  /** Up now: not ejected, its check passing and the last connect (probe or request) reached it. */
  protected isUp(i: number, now = Date.now()): boolean {
    this.refresh(now);
    return this.stateOf(this.at(i), now) === 'up';
  }

  private stateOf(e: Endpoint, now: number): EndpointState {
    if (e.health.ejected(now)) return 'ejected';
    return e.upstream.reachable() ? 'up' : 'down';
  }

  /**
   * The endpoint for the next try, never one already tried by this request: among those up (not
   * ejected, the probe or the last request reached them), else those not ejected (the probe may
   * lag), else the least bad: the one whose ejection ends first.
   */
  private choose(tried: readonly number[], key?: string): number {
    const now = Date.now();
    // Every endpoint tried already (more attempts than endpoints): any may take the next try.
    const again = tried.length >= this.endpoints.length && this.all.every((i) => tried.includes(i));
    const fresh = (i: number) => again || !tried.includes(i);
    let candidates = this.usable(now).filter(fresh);
    if (candidates.length === 0) candidates = this.all.filter((i) => fresh(i) && !this.at(i).health.ejected(now));
    if (candidates.length > 0) return this.picker.pick(candidates, (i) => this.at(i).health.active, key);
    const rest = this.all.filter(fresh);
    const pool = rest.length > 0 ? rest : this.all;
    return pool.reduce((a, b) => (this.at(b).health.ejectedUntil < this.at(a).health.ejectedUntil ? b : a));
  }

  /** Endpoints up now (probe connected, not ejected). */
  private usable(now: number): number[] {
    this.refresh(now);
    return this.all.filter((i) => this.stateOf(this.at(i), now) === 'up');
  }

  /** Ends ejections whose time is over, or whose endpoint the probe saw go down and come back. */
  private refresh(now: number): void {
    for (const e of this.endpoints) {
      const h = e.health;
      if (h.ejectedUntil === 0) continue;
      if (!h.ejected(now)) {
        this.outliers.restore(h);
        this.logger.info({ endpoint: e.label }, `upstream "${this.name}": endpoint returns after its ejection`);
        continue;
      }
      const connected = e.upstream.reachable();
      if (!connected) h.probeSawDown = true;
      else if (h.probeSawDown) {
        this.outliers.restore(h);
        this.logger.info({ endpoint: e.label }, `upstream "${this.name}": endpoint back early (the probe reached it)`);
      }
    }
  }

  private failed(i: number): void {
    const e = this.at(i);
    const now = Date.now();
    if (!this.outliers.failure(e.health, now, !e.upstream.reachable())) return;
    this.metrics?.ejected(this.name, e.label);
    this.logger.warn(
      { endpoint: e.label, ejections: e.health.ejections, ms: e.health.ejectedUntil - now },
      `upstream "${this.name}": endpoint ejected after consecutive failures`,
    );
  }

  protected at(i: number): Endpoint {
    return this.endpoints[i] as Endpoint;
  }
}

/** Time a retry must have left of the overall timeout, after its wait, to be made. */
const minTryMs = 10;

/** A response timeout (not a connect timeout, which is a connect failure). */
function isTimeout(err: unknown): boolean {
  return err instanceof GatewayError && err.kind === 'upstream_timeout' && !isUnreachable(err.cause);
}

function isClientAbort(err: unknown): boolean {
  return err instanceof GatewayError && err.kind === 'bad_request';
}
