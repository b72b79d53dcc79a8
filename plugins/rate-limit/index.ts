/**
 * rate-limit: the `rate-limit` stage (per-client limits, inline or on a shared limiter), the
 * `token-limit` stage (per-client tokens per window for OpenAI-style requests) and the
 * `rate-limiter` resource (a limiter several stages share). Contract for other plugins: api.ts.
 */
import resource from './resource.ts';
import stage from './stage.ts';
import tokenStage from './token-stage.ts';

export default [stage, tokenStage, resource];
