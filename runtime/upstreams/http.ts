/**
 * `http` / `openai` upstreams (and the transport of `jsonrpc`): an undici keep-alive pool.
 * Small answers (by Content-Length) are handed back whole, others as streams (answer-handler.ts).
 * A periodic probe (its own one-connection client, so long-lived SSE streams filling the pool
 * cannot starve it) runs the active check
 * (active-check.ts) and keeps health() current; failed connects flip it at once. An endpoint the
 * check has marked down stays down until the check passes again, whatever requests say meanwhile.
 */
import type { Logger } from 'pino';
import { Client, Pool } from 'undici';
import { GatewayError } from '../errors.ts';
import { ActiveCheck, type CheckStatus } from './active-check.ts';
import { AnswerHandler } from './answer-handler.ts';
import type { ResolvedHttpConfig } from './config.ts';
import { Deadline } from './deadline.ts';
import { describeFailure, isUnreachable, type Timeouts, timeoutError, toUpstreamError } from './http-errors.ts';
import { Readiness } from './readiness.ts';
import type { HttpForwardRequest, HttpForwardResponse, HttpUpstream, UpstreamHealth } from './types.ts';

/** Headers the transport sets itself; a caller's value would be wrong or unsafe. */
const transportHeaders = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te']);

export class HttpUpstreamImpl implements HttpUpstream {
  readonly url: URL;
  protected readonly logger: Logger;
  private readonly pool: Pool;
  private readonly probeClient: Client;
  private readonly basePath: string;
  private readonly timeouts: Timeouts;
  private readonly state: Readiness;
  private readonly check: ActiveCheck;
  private probeTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    readonly name: string,
    protected readonly config: ResolvedHttpConfig,
    logger: Logger,
  ) {
    this.url = new URL(config.url);
    this.logger = logger; // bound to the upstream by the service graph
    this.state = new Readiness(name, this.logger);
    this.basePath = this.url.pathname.replace(/\/+$/, '');
    this.timeouts = { connectMs: config.connect_timeout_ms, responseMs: config.timeout_ms };
    const common = {
      connectTimeout: config.connect_timeout_ms,
      headersTimeout: config.timeout_ms,
      // Enforced on a native timer (watchBodyIdle); undici's coarse one is only a backstop.
      bodyTimeout: config.body_timeout_ms > 0 ? config.body_timeout_ms + backstopMs : 0,
      keepAliveTimeout: config.keep_alive_timeout_ms,
    };
    this.pool = new Pool(this.url.origin, { ...common, connections: config.connections });
    this.probeClient = new Client(this.url.origin, { ...common, headersTimeout: config.health_check.timeout_ms });
    this.check = new ActiveCheck(name, this.url, config, this.probeClient, this.basePath, this.logger);
    this.probe();
  }

  get kind(): HttpUpstream['kind'] {
    return this.config.kind;
  }

  /** health().connected without building the answer (the balancer asks on every pick). */
  reachable(): boolean {
    return this.state.connected && this.check.verdict.healthy !== false;
  }

  health(): UpstreamHealth {
    const checkDown = this.check.verdict.healthy === false;
    return {
      connected: this.state.connected && !checkDown,
      error: checkDown ? this.check.verdict.lastError : this.state.error,
      detail: { url: this.url.href, kind: this.kind, check: this.check.status() },
    };
  }

  /** The active check's verdict and counts (health output of balanced upstreams). */
  checkStatus(): CheckStatus {
    return this.check.status();
  }

  ready(timeoutMs = 10000): Promise<void> {
    return this.state.wait(timeoutMs);
  }

  checked(timeoutMs: number): Promise<void> {
    return this.state.waitChecked(timeoutMs);
  }

  /** Path and query appended to the base path; `/` means the base path itself. */
  resolvePath(path: string): string {
    const q = path.indexOf('?');
    const p = q === -1 ? path : path.slice(0, q);
    const query = q === -1 ? '' : path.slice(q);
    if (p === '' || p === '/') return (this.basePath || '/') + query;
    return this.basePath + (p.startsWith('/') ? p : `/${p}`) + query;
  }

  forward(req: HttpForwardRequest): Promise<HttpForwardResponse> {
    const headers: Record<string, string | string[]> = {};
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v !== undefined && !transportHeaders.has(k.toLowerCase())) headers[k] = v;
    }
    const timeouts = req.timeoutMs ? { ...this.timeouts, responseMs: req.timeoutMs } : this.timeouts;
    const responseMs = timeouts.responseMs;
    const bodyMs = this.config.body_timeout_ms;
    return new Promise((resolve, reject) => {
      // undici's dispatch with a handler of ours (answer-handler.ts): a small answer comes whole,
      // without the body stream, async resource and abort listener of undici's `request`.
      const handler = new AnswerHandler({
        method: req.method,
        requestBody: req.body,
        timeoutMs: responseMs,
        idleMs: bodyMs,
        idleError: () => bodyTimeoutError(this.name, bodyMs),
        settle: (err, answer) => {
          if (err || !answer) {
            reject(this.#failed(err, deadline, timeouts, req.signal));
            return;
          }
          // A small answer came whole within the deadline; a streamed one's deadline ends at its
          // headers (body_timeout_ms watches the rest).
          deadline.clear();
          this.state.up();
          resolve(answer);
        },
      });
      const deadline = new Deadline(
        responseMs,
        req.signal,
        () => timeoutError(this.name, responseMs),
        (reason) => handler.abort(reason),
      );
      try {
        this.pool.dispatch(
          {
            method: req.method as 'GET',
            path: this.resolvePath(req.path),
            headers,
            body: req.body ?? null,
            // The deadline above fires on time; undici's coarse timer is only a backstop.
            headersTimeout: responseMs + backstopMs,
          },
          handler,
        );
      } catch (err) {
        reject(this.#failed(err, deadline, timeouts, req.signal));
      }
    });
  }

  /** The request failed before its answer's headers: the error to throw (and the endpoint marked down when unreachable). */
  #failed(err: unknown, deadline: Deadline, timeouts: Timeouts, signal: HttpForwardRequest['signal']): unknown {
    deadline.clear();
    if (isUnreachable(err)) this.state.down(describeFailure(err));
    return toUpstreamError(err, this.name, timeouts, signal);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.probeTimer);
    await this.check.close();
    // In-flight streams get a moment to finish, then the pool is torn down.
    const graceful = Promise.all([this.pool.close(), this.probeClient.close()]);
    const timer = setTimeout(() => {
      this.pool.destroy().catch(() => {});
      this.probeClient.destroy().catch(() => {});
    }, 2000);
    await graceful.catch(() => {});
    clearTimeout(timer);
  }

  private async probe(): Promise<void> {
    if (this.closed) return;
    const failure = await this.check.run();
    if (this.closed) return;
    const changed = this.check.verdict.record(failure === undefined, failure);
    if (changed !== undefined && this.check.verdict.checks > 1) {
      const c = this.config.health_check;
      if (changed) this.logger.info(`upstream "${this.name}": ${c.healthy_threshold} health check(s) passed, up again`);
      else
        this.logger.warn(
          { reason: failure },
          `upstream "${this.name}": ${c.unhealthy_threshold} health check(s) failed`,
        );
    }
    // A pass brings back an endpoint a failed connect flipped down (unless the verdict is still down).
    if (failure === undefined) {
      if (this.check.verdict.healthy) this.state.up();
    } else if (this.check.verdict.healthy === false) this.state.down(failure);
    this.probeTimer = setTimeout(() => this.probe(), this.config.health_check.interval_ms);
    this.probeTimer.unref();
  }
}

const backstopMs = 1000;

function bodyTimeoutError(upstream: string, ms: number): GatewayError {
  return new GatewayError('upstream_timeout', `Upstream sent nothing of its answer for ${ms} ms`, {
    details: { upstream, body_timeout_ms: ms },
  });
}
