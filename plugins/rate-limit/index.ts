/**
 * rate-limit: the `rate-limit` stage (per-client limits, inline or on a shared limiter) and the
 * `rate-limiter` resource (a limiter several stages share). Contract for other plugins: api.ts.
 */
import resource from './resource.ts';
import stage from './stage.ts';

export default [stage, resource];
