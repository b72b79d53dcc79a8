/**
 * When an `http` / `openai` upstream request may be tried again, and after how long. Only where
 * it is safe: a connect failure (nothing reached the endpoint) for any method; a reset or a
 * per-try timeout (the request may have reached it) only for an idempotent one; an answer whose
 * status the config names (`retry.on`) for an idempotent method, and 429 / 503 for any method
 * (both say the upstream refused the request rather than did it, RFC 9110 §15.5.30 / §15.6.4).
 * A body that cannot be sent again (a stream) is never retried. Backoff is exponential with full
 * jitter; a `Retry-After` (seconds or an HTTP date) is waited for, and one longer than
 * `max_retry_after_ms` ends the retries (the answer goes to the client, header included).
 */

import type { FromSchema } from '../config/from-schema.ts';
import { withDefaults } from '../config/options.ts';
import { GatewayError } from '../errors.ts';
import { balancingProperties, type RetryConfig } from './config.ts';
import { isUnreachable } from './http-errors.ts';
import type { HttpForwardRequest, HttpForwardResponse } from './types.ts';

/** Named failures `retry.on` may list besides status codes. */
export type RetryCondition = 'connect_failure' | 'reset' | 'timeout';
export const retryConditions: readonly RetryCondition[] = ['connect_failure', 'reset', 'timeout'];

export interface ResolvedRetry {
  attempts: number;
  connectFailure: boolean;
  reset: boolean;
  timeout: boolean;
  statuses: ReadonlySet<number>;
  baseMs: number;
  maxMs: number;
  maxRetryAfterMs: number;
  perTryTimeoutMs: number | undefined;
  budgetPercent: number;
  budgetMinConcurrency: number;
}

/**
 * `retry:` with its schema's defaults (balancingProperties.retry), its `backoff` and `budget`
 * defaulting to `{}` so that their members' defaults apply without them: the defaults are written
 * once, in the schema.
 */
const retryResolved = {
  ...balancingProperties.retry,
  properties: {
    ...balancingProperties.retry.properties,
    backoff: { ...balancingProperties.retry.properties.backoff, default: {} },
    budget: { ...balancingProperties.retry.properties.budget, default: {} },
  },
} as const;
type RetrySettings = FromSchema<typeof retryResolved>;

export function resolveRetry(c: RetryConfig | undefined): ResolvedRetry {
  const r = withDefaults<RetrySettings>(retryResolved, c, 'upstream retry');
  return {
    attempts: r.attempts,
    connectFailure: r.on.includes('connect_failure'),
    reset: r.on.includes('reset'),
    timeout: r.on.includes('timeout'),
    statuses: new Set(r.on.filter((x): x is number => typeof x === 'number')),
    baseMs: r.backoff.base_ms,
    maxMs: r.backoff.max_ms,
    maxRetryAfterMs: r.max_retry_after_ms,
    perTryTimeoutMs: r.per_try_timeout_ms,
    budgetPercent: r.budget.percent,
    budgetMinConcurrency: r.budget.min_concurrency,
  };
}

const idempotentMethods = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
/** Statuses that say the request was refused, not done: retried for any method when listed. */
const refusals = new Set([429, 503]);

/** RFC 9110 §9.2.2, or a request the client marked with an `Idempotency-Key` (the upstream deduplicates). */
export function isIdempotent(req: HttpForwardRequest): boolean {
  return idempotentMethods.has(req.method.toUpperCase()) || req.headers['idempotency-key'] !== undefined;
}

export function isReplayable(body: HttpForwardRequest['body']): boolean {
  return body == null || typeof body === 'string' || Buffer.isBuffer(body);
}

/** Why a failed try may be retried (the metric's `reason`), or undefined when it may not. */
export function retryReasonForError(p: ResolvedRetry, err: unknown, idempotent: boolean): string | undefined {
  if (!(err instanceof GatewayError)) return undefined;
  if (isUnreachable(err.cause)) return p.connectFailure ? 'connect_failure' : undefined;
  if (!idempotent) return undefined;
  if (err.kind === 'upstream_timeout') return p.timeout ? 'timeout' : undefined;
  if (err.kind === 'upstream_error') return p.reset ? 'reset' : undefined;
  return undefined; // a client abort, or a refusal of the gateway's own
}

export function retryReasonForAnswer(p: ResolvedRetry, status: number, idempotent: boolean): string | undefined {
  if (!p.statuses.has(status)) return undefined;
  return idempotent || refusals.has(status) ? String(status) : undefined;
}

/** Full jitter (AWS's "Exponential Backoff And Jitter"): uniform in [0, min(max, base·2^(retry-1))]. */
export function backoffMs(p: ResolvedRetry, retry: number, random = Math.random): number {
  return Math.floor(random() * Math.min(p.maxMs, p.baseMs * 2 ** (retry - 1)));
}

/** `Retry-After` in ms (delta-seconds or an HTTP date, RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(res: HttpForwardResponse, now = Date.now()): number | undefined {
  const v = res.headers['retry-after'];
  if (typeof v !== 'string') return undefined;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  const at = Date.parse(s);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

type Signal = HttpForwardRequest['signal'];

/** Waits `ms`, or rejects with the client's abort (`bad_request`, as a forward would) when it goes away first. */
export function pause(ms: number, signal: Signal): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = () => new GatewayError('bad_request', 'Request aborted by the client');
    if (signal?.aborted) return reject(aborted());
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    const timer = setTimeout(() => {
      if (!signal) return resolve();
      if ('removeEventListener' in signal) signal.removeEventListener('abort', onAbort);
      else signal.off('abort', onAbort);
      resolve();
    }, ms);
    if (!signal) return;
    if ('addEventListener' in signal) signal.addEventListener('abort', onAbort, { once: true });
    else signal.once('abort', onAbort);
  });
}
