/**
 * The `rate-limiter` resource: one limiter (memory or Redis) that several stages share by name.
 * The rate-limit stage counts with it (`limiter: <name>`); another stage can read a client's state
 * without counting (`peek`), e.g. a tenant-info endpoint reporting what is left of a tenant's
 * requests per minute. The value is the Limiter of api.ts.
 *
 *   resources:
 *     limits: { type: rate-limiter, limit: 60, window_seconds: 60, backend: redis }
 */
import { defineResource, type FromSchema, type JsonSchema } from '../../runtime/index.ts';
import { createLimiter, type Limiter } from './limiter.ts';
import { limiterOptions, limiterProperties } from './options.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['limit'],
  properties: {
    ...limiterProperties,
    limit: {
      type: 'integer',
      minimum: 1,
      description: 'Requests allowed per window and client, unless a stage gives a per-request limit',
    },
    prefix: {
      type: 'string',
      minLength: 1,
      description:
        'Store key prefix (default `switchyard:rl:<service>:<resource name>`); limiters sharing it and a Redis share counters',
    },
  },
} as const satisfies JsonSchema;
type RateLimiterOptions = FromSchema<typeof optionsSchema>;

export default defineResource<RateLimiterOptions, Limiter>({
  type: 'rate-limiter',
  description:
    'A shared fixed-window rate limiter (memory or Redis) for rate-limit stages and the stages that report it',
  options: optionsSchema,
  async create(options, env) {
    // The runtime names the resource on its logger (`resource`), which keeps two limiters of one
    // service apart in a shared Redis by default.
    const name = (env.logger.bindings() as { resource?: unknown }).resource;
    const defaultPrefix = `switchyard:rl:${env.service.name}:${typeof name === 'string' ? name : 'limiter'}`;
    const limiter = await createLimiter(limiterOptions(options, defaultPrefix, env.logger));
    return {
      value: limiter,
      health: () => limiter.health(),
      describe: () => ({ limit: limiter.limit, window_seconds: limiter.windowSeconds, backend: limiter.backend }),
      close: () => limiter.close(),
    };
  },
});
