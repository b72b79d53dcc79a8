/**
 * The active health check of one endpoint (what its background probe runs): a TCP connect by
 * default, a GET of `path` (passes below 500, or on `expect_status`), or a JSON-RPC call of
 * `jsonrpc_method` (passes on a result; with `protocol: mcp` inside an MCP session of the check's
 * own, opened once and reopened when the server forgets it, since stateful MCP servers refuse a
 * sessionless `ping`). The verdict moves only after `unhealthy_threshold` failures or
 * `healthy_threshold` passes in a row, so one lost probe does not flap the endpoint; the very
 * first outcome decides at once (a start waits for it).
 */
import { connect } from 'node:net';
import type { Logger } from 'pino';
import type { Client } from 'undici';
import type { ResolvedHttpConfig } from './config.ts';
import { describeFailure } from './http-errors.ts';
import { RpcOverHttp } from './rpc-over-http.ts';

export type CheckKind = 'tcp' | 'http' | 'jsonrpc';

export interface CheckStatus {
  kind: CheckKind;
  /** Undefined before the first outcome. */
  healthy?: boolean;
  /** Passes / failures in a row now. */
  passes: number;
  failures: number;
  checks: number;
  failed_checks: number;
  last_error?: string;
}

/** Failures / passes in a row and the verdict they give. */
export class CheckVerdict {
  healthy: boolean | undefined;
  passes = 0;
  failures = 0;
  checks = 0;
  failedChecks = 0;
  lastError: string | undefined;

  constructor(
    private readonly unhealthyThreshold: number,
    private readonly healthyThreshold: number,
  ) {}

  /** One outcome; returns the new verdict when it changed. */
  record(ok: boolean, error?: string): boolean | undefined {
    this.checks++;
    if (ok) {
      this.failures = 0;
      this.passes++;
      if (this.healthy === true) return undefined;
      if (this.healthy === undefined || this.passes >= this.healthyThreshold) return this.set(true);
      return undefined;
    }
    this.failedChecks++;
    this.lastError = error;
    this.passes = 0;
    this.failures++;
    if (this.healthy === false) return undefined;
    if (this.healthy === undefined || this.failures >= this.unhealthyThreshold) return this.set(false);
    return undefined;
  }

  private set(healthy: boolean): boolean {
    this.healthy = healthy;
    return healthy;
  }
}

export class ActiveCheck {
  readonly kind: CheckKind;
  readonly verdict: CheckVerdict;
  private readonly rpc?: RpcOverHttp;

  constructor(
    private readonly name: string,
    private readonly url: URL,
    private readonly config: ResolvedHttpConfig,
    /** The probe's own one-connection client: a pool full of long SSE streams cannot starve it. */
    private readonly client: Client,
    private readonly basePath: string,
    logger: Logger,
  ) {
    const c = config.health_check;
    this.kind = c.jsonrpc_method ? 'jsonrpc' : c.path ? 'http' : 'tcp';
    this.verdict = new CheckVerdict(c.unhealthy_threshold, c.healthy_threshold);
    if (this.kind === 'jsonrpc') {
      this.rpc = new RpcOverHttp(
        name,
        { protocol: config.protocol, timeout_ms: c.timeout_ms, connect_timeout_ms: config.connect_timeout_ms },
        logger,
        async (req) => {
          const res = await this.client.request({
            method: req.method as 'POST',
            path: this.basePath || '/',
            headers: req.headers as Record<string, string>,
            body: (req.body ?? null) as string | null,
            signal: req.signal as AbortSignal | undefined,
          });
          return { status: res.statusCode, headers: res.headers, body: res.body };
        },
      );
    }
  }

  /** One check; resolves to undefined when it passed, else the reason. */
  async run(): Promise<string | undefined> {
    const c = this.config.health_check;
    try {
      if (this.kind === 'tcp') {
        await tcpConnect(this.url, c.timeout_ms);
      } else if (this.kind === 'http') {
        const res = await this.client.request({
          method: 'GET',
          path: c.path as string,
          signal: AbortSignal.timeout(c.timeout_ms),
        });
        await res.body.dump();
        const ok = c.expect_status ? c.expect_status.includes(res.statusCode) : res.statusCode < 500;
        if (!ok) return `health check answered ${res.statusCode}`;
      } else {
        const answer = await (this.rpc as RpcOverHttp).call(
          { jsonrpc: '2.0', id: 'health-check', method: c.jsonrpc_method as string },
          { timeoutMs: c.timeout_ms },
        );
        if (!answer || answer.result === undefined) {
          const error = answer?.error as { message?: unknown } | undefined;
          return `health check ${c.jsonrpc_method} answered ${error ? `an error: ${String(error.message)}` : 'no result'}`;
        }
      }
      return undefined;
    } catch (err) {
      return (err as Error)?.name === 'TimeoutError'
        ? `health check timed out (${c.timeout_ms} ms)`
        : describeFailure(err);
    }
  }

  /** Ends the check's own MCP session, if it holds one. */
  close(): Promise<void> {
    return this.rpc?.close() ?? Promise.resolve();
  }

  status(): CheckStatus {
    const v = this.verdict;
    return {
      kind: this.kind,
      ...(v.healthy !== undefined ? { healthy: v.healthy } : {}),
      passes: v.passes,
      failures: v.failures,
      checks: v.checks,
      failed_checks: v.failedChecks,
      ...(v.lastError ? { last_error: v.lastError } : {}),
    };
  }
}

function tcpConnect(url: URL, timeoutMs: number): Promise<void> {
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: timeoutMs });
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('timeout', () => {
      socket.destroy();
      reject(Object.assign(new Error('connect timeout'), { code: 'UND_ERR_CONNECT_TIMEOUT' }));
    });
    socket.once('error', (err) => {
      socket.destroy();
      reject(err);
    });
  });
}
