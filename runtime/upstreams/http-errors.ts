/**
 * Maps undici / socket failures to the gateway's typed errors: a peer that cannot be reached or
 * drops the connection is `upstream_error` (502), one that does not answer in time is
 * `upstream_timeout` (504).
 */
import { GatewayError } from '../errors.ts';

/** Codes meaning the upstream host is not reachable at all (health flips on them). */
const unreachable = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const reasons: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed',
  UND_ERR_SOCKET: 'connection closed by the upstream',
  UND_ERR_CLOSED: 'connection pool closed',
  UND_ERR_DESTROYED: 'connection pool closed',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
};

export function errorCode(err: unknown): string | undefined {
  const e = err as { code?: string; cause?: { code?: string } };
  return e?.code ?? e?.cause?.code;
}

export function isUnreachable(err: unknown): boolean {
  return unreachable.has(errorCode(err) ?? '');
}

export function describeFailure(err: unknown): string {
  const code = errorCode(err);
  return (code && reasons[code]) ?? (err as Error)?.message ?? String(err);
}

export interface Timeouts {
  connectMs: number;
  responseMs: number;
}

export function timeoutError(upstream: string, timeoutMs: number, cause?: unknown): GatewayError {
  return new GatewayError('upstream_timeout', `Upstream did not answer within ${timeoutMs} ms`, {
    details: { upstream, timeout_ms: timeoutMs },
    cause,
  });
}

export function toUpstreamError(
  err: unknown,
  upstream: string,
  t: Timeouts,
  signal?: { readonly aborted: boolean },
): GatewayError {
  if (err instanceof GatewayError) return err;
  const code = errorCode(err);
  if (signal?.aborted || (err as Error)?.name === 'AbortError' || code === 'UND_ERR_ABORTED') {
    return new GatewayError('bad_request', 'Request aborted by the client', { cause: err });
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new GatewayError('upstream_timeout', `Could not connect to the upstream within ${t.connectMs} ms`, {
      details: { upstream, timeout_ms: t.connectMs, reason: 'connect timeout' },
      cause: err,
    });
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return timeoutError(upstream, t.responseMs, err);
  }
  return new GatewayError('upstream_error', `Upstream request failed: ${describeFailure(err)}`, {
    details: { upstream, reason: describeFailure(err) },
    cause: err,
  });
}
