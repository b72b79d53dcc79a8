/**
 * Provider failover: which failures move a request on to the next upstream of its list, in which
 * order the upstreams are tried, and the error when none could answer.
 *
 * A request moves on only while nothing of an answer reached the client: on a connect failure, a
 * timeout before the answer's headers, a circuit-broken upstream (max_requests), a 5xx or 429
 * answer, a whole-read answer cut short, or an event stream that ends or fails before its first
 * byte (http.ts waits for it). A stream whose first byte came is the client's: it is never
 * replayed elsewhere, even while a stage still holds it back. The request body is held whole (a Buffer), so it can be sent again.
 *
 * An upstream that failed is tried after the others for a while (its cooldown: the answer's
 * Retry-After when it gave one, else `cooldown_ms`), and so is one its health probe sees down:
 * a failing provider does not stay first in line, costing every request a failed try. It is
 * still tried when the others fail too (demoted, never dropped: failing closed would need none).
 */
import { GatewayError, type HttpUpstream, type ProviderFailure } from '../../runtime/index.ts';

/** Why a thrown upstream error moves the request on (undefined: it does not). */
export function failureOfError(err: unknown): ProviderFailure['reason'] | undefined {
  if (!(err instanceof GatewayError)) return undefined;
  switch (err.kind) {
    case 'upstream_error':
      return 'connect';
    case 'upstream_timeout':
      return 'timeout';
    case 'unavailable':
      return 'unavailable';
    default:
      // A client that went away (bad_request), anything else: not the upstream's fault.
      return undefined;
  }
}

/** An answer status that moves the request on: the provider failed or is rate limited. */
export function failedStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

/** Retry-After in ms (delta seconds or an HTTP date), undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The longest cooldown honoured from a Retry-After (a provider saying "in a day" is still retried). */
const maxCooldownMs = 300_000;

/**
 * When each upstream may be tried first again. Keyed by the upstream object, which a reload keeps
 * while its config is unchanged, so a reload does not forget which providers are failing; shared
 * by every proxy stage of the process.
 */
const coolingUntil = new WeakMap<HttpUpstream, number>();

export function coolDown(upstream: HttpUpstream, defaultMs: number, retryAfter?: number, now = Date.now()): void {
  const ms = Math.min(maxCooldownMs, retryAfter ?? defaultMs);
  if (ms > 0) coolingUntil.set(upstream, Math.max(coolingUntil.get(upstream) ?? 0, now + ms));
}

export function recovered(upstream: HttpUpstream): void {
  coolingUntil.delete(upstream);
}

/** The upstreams in the order to try them: the usable ones as listed, then the demoted ones as listed. */
export function tryOrder(list: readonly HttpUpstream[], now = Date.now()): readonly HttpUpstream[] {
  // The common case (nothing demoted) allocates nothing.
  if (!list.some((u) => isDemoted(u, now))) return list;
  const usable = list.filter((u) => !isDemoted(u, now));
  return [...usable, ...list.filter((u) => !usable.includes(u))];
}

function isDemoted(u: HttpUpstream, now: number): boolean {
  if ((coolingUntil.get(u) ?? 0) > now) return true;
  // The probe saw it go down (an upstream not yet probed has no error: it keeps its place).
  const h = u.health();
  return !h.connected && h.error !== undefined;
}

/** The answer when every upstream of the list failed: 429 when each was rate limited, else 502. */
export function noProviderError(failed: readonly ProviderFailure[], retryAfter: number | undefined): GatewayError {
  const providers = failed.map((f) => ({ ...f }));
  const names = failed.map((f) => f.upstream).join(', ');
  if (failed.length > 0 && failed.every((f) => f.status === 429)) {
    return new GatewayError('rate_limited', `Every provider is rate limited (tried ${names})`, {
      details: { providers },
      headers: retryAfter === undefined ? undefined : { 'Retry-After': String(Math.ceil(retryAfter / 1000)) },
    });
  }
  return new GatewayError('upstream_error', `No provider could answer (tried ${names})`, { details: { providers } });
}
