/**
 * Public contract of the rate-limit plugin for other plugins (e.g. per-tenant limits): a limiter
 * with its own limit, window and key prefix (or the value of a `rate-limiter` resource), the key
 * the stage counts a caller under, plus the headers and the typed 429 that go with it, and the
 * limiter's token budgets (`limiter.tokens`: what the token-limit stage reserves and settles).
 * Other plugins import this file only.
 */
export { callerKey } from './keys.ts';
export type { Limiter, LimiterOptions, LimitResult } from './limiter.ts';
export { createLimiter, rateLimitedError, rateLimitHeaders } from './limiter.ts';
export type { Reservation, ReserveResult, TokenCounter, TokenState } from './tokens.ts';
