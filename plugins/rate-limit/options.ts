/**
 * The options that make a limiter (limit, window, store), shared by the `rate-limit` stage (inline
 * limiter) and the `rate-limiter` resource, so both read and default them the same way.
 */
import type { Logger } from 'pino';
import type { FromSchema } from '../../runtime/index.ts';
import type { LimiterOptions } from './limiter.ts';

export const limiterProperties = {
  limit: { type: 'integer', minimum: 1, description: 'Requests allowed per window and client' },
  window_seconds: { type: 'integer', minimum: 1, default: 60 },
  backend: { enum: ['memory', 'redis'], default: 'memory' },
  redis_url: { type: 'string', default: 'redis://127.0.0.1:6379' },
  prefix: {
    type: 'string',
    minLength: 1,
    description: 'Store key prefix (default `switchyard:rl:<service>`); stages sharing it share counters',
  },
  insurance: {
    type: 'boolean',
    default: true,
    description: 'On Redis failure count in memory per process (logged) instead of failing the stage',
  },
} as const;

/** The limiter's options as a `rate-limiter` resource gets them (defaults applied). */
export type LimiterConfig = FromSchema<{ type: 'object'; required: ['limit']; properties: typeof limiterProperties }>;

/** Limiter options from config options, with the defaults `create` must apply itself (no schema in tests). */
export function limiterOptions(config: LimiterConfig, defaultPrefix: string, logger: Logger): LimiterOptions {
  return {
    limit: config.limit,
    windowSeconds: config.window_seconds,
    backend: config.backend,
    redisUrl: config.redis_url,
    prefix: config.prefix ?? defaultPrefix,
    insurance: config.insurance,
    logger,
  };
}

/**
 * A limit, or a limiter resource that has one: the `anyOf` of the rate-limit and token-limit
 * stages. (`properties: {x: true}` only keeps ajv's strictRequired happy: the real definitions are
 * the stage's.)
 */
export const limitOrLimiter = [
  { required: ['limit'], properties: { limit: true } },
  { required: ['limiter'], properties: { limiter: true } },
] as const;
