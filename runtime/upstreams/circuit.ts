/**
 * Circuit breaking: at most `max_requests` calls in flight to one upstream. Without it a slow
 * upstream gathers every waiting request (undici's pool queues them without a bound; a child
 * process's calls pile up the same way); one more is refused at once with 503 `unavailable` in
 * the route's dialect (Retry-After: 1) and counted in switchyard_upstream_overflow_total.
 */
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import { around } from './around.ts';
import type { Upstream } from './types.ts';

export function limited<U extends Upstream>(upstream: U, maxRequests: number | undefined, metrics?: MetricsKit): U {
  if (maxRequests === undefined) return upstream;
  const overflow = metrics?.counter({
    name: 'switchyard_upstream_overflow_total',
    help: 'Calls refused because an upstream had max_requests in flight (circuit breaking)',
    labelNames: ['upstream'] as const,
  });
  let inFlight = 0;
  const guarded = async <R>(run: () => Promise<R>): Promise<R> => {
    if (inFlight >= maxRequests) {
      overflow?.inc({ upstream: upstream.name });
      throw new GatewayError(
        'unavailable',
        `Upstream "${upstream.name}" has ${inFlight} requests in flight (max_requests)`,
        {
          details: { upstream: upstream.name, max_requests: maxRequests },
          headers: { 'Retry-After': '1' },
        },
      );
    }
    inFlight++;
    try {
      return await run();
    } finally {
      inFlight--;
    }
  };
  return around(upstream, {
    // In flight until the answer's headers: a streamed body no longer holds a slot.
    forward: (forward) => (req) => guarded(() => forward(req)),
    call: (call) => (message, options) => guarded(() => call(message, options)),
  });
}
