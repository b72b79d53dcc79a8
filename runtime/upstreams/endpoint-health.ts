/**
 * Passive outlier ejection of the endpoints of one balanced upstream: what real requests say about
 * each endpoint. N failures in a row (connect failure, timeout, 5xx answer) eject it for
 * base * 2^(k-1) (k: its ejections so far), capped; a success resets the count. Never more than
 * `max_ejected_share` of the endpoints are ejected at once, so an outage of the backends' own
 * making (all answering 5xx) still reaches them rather than emptying the pool. Endpoints the
 * active check marks down are not counted here (as in Envoy): they are avoided while another is
 * up, and balanced.ts still reaches them when none is.
 */
import type { OutlierConfig } from './config.ts';

export type EndpointState = 'up' | 'down' | 'ejected';

export class EndpointHealth {
  consecutiveFailures = 0;
  /** Ejections so far (the next one lasts twice as long). */
  ejections = 0;
  /** While ejected: when it may serve again (ms since epoch, Date.now()). */
  ejectedUntil = 0;
  /** The background probe saw the endpoint down while it was ejected: its coming back up returns it early. */
  probeSawDown = false;
  /** Requests under way (least-request balancing). */
  active = 0;

  ejected(now: number): boolean {
    return this.ejectedUntil > now;
  }
}

export class OutlierDetector {
  constructor(
    private readonly config: Required<OutlierConfig>,
    private readonly endpoints: readonly EndpointHealth[],
  ) {}

  /** A success: the failures in a row start again from zero. */
  success(e: EndpointHealth): void {
    e.consecutiveFailures = 0;
  }

  /**
   * A failure; true when it ejected the endpoint. `down`: the probe state right now (a connect
   * failure flips it), so that the probe seeing the endpoint back can return it early.
   */
  failure(e: EndpointHealth, now: number, down: boolean): boolean {
    e.consecutiveFailures++;
    if (e.consecutiveFailures < this.config.consecutive_failures || e.ejected(now)) return false;
    if (!this.mayEject(now)) return false;
    e.ejections++;
    const ms = Math.min(this.config.base_ejection_ms * 2 ** (e.ejections - 1), this.config.max_ejection_ms);
    e.ejectedUntil = now + ms;
    e.consecutiveFailures = 0;
    e.probeSawDown = down;
    return true;
  }

  /** One more ejection keeps the ejected share within the cap. */
  mayEject(now: number): boolean {
    let out = 0;
    for (const e of this.endpoints) if (e.ejected(now)) out++;
    return out + 1 <= Math.floor(this.config.max_ejected_share * this.endpoints.length);
  }

  /** Ends an ejection before its time (the probe saw the endpoint come back). */
  restore(e: EndpointHealth): void {
    e.ejectedUntil = 0;
    e.probeSawDown = false;
  }
}
