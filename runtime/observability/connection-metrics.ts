/**
 * `switchyard_connections_refused_total{reason}` and `switchyard_connections_closed_total{reason}`:
 * the main listener's connection fairness (runtime/server/connections.ts, upgrade.ts) seen from
 * Prometheus, as ServiceInfo.connections() shows it to the admin API. A client locked out, a
 * slowloris or an upgrade flood then shows on a dashboard, not only in one process's snapshot.
 * Every reason is exported from the start (at 0), so a rate() over it has a series to work on.
 */
import type { MetricsKit } from './metrics.ts';

/** Connections (or upgrade handshakes) refused before serving anything. */
export const refusalReasons = [
  /** At `limits.max_connections` with no room to make: answered 503 with Retry-After (closed at once past the refusal slots). */
  'max_connections',
  /**
   * Near `limits.max_connections` (from `connections_high_water` of it), its client address held
   * `limits.max_connections_per_client`: answered 503 with Retry-After.
   */
  'per_client',
  /** A WebSocket handshake over `limits.max_upgraded_connections`: 503. */
  'upgrade_limit',
  /** A WebSocket handshake refused by the route's stages (a missing key, a rate limit...) or while overloaded. */
  'upgrade_refused',
] as const;

/** Connections the service closed to protect the others. */
export const closeReasons = [
  /** Headers not complete within `limits.header_timeout_ms` (slowloris): 408. */
  'header_timeout',
  /** A request body with no byte for `limits.body_idle_timeout_ms`. */
  'body_stalled',
  /** An idle keep-alive connection closed near `limits.max_connections` to make room. */
  'idle_reclaimed',
  /**
   * Near `limits.max_connections`, a connection without complete headers `limits.slow_header_ms`
   * after connecting (or, at the maximum, one of an address holding two more than a newcomer's)
   * closed to make room.
   */
  'slow_header_reclaimed',
] as const;

export type RefusalReason = (typeof refusalReasons)[number];
export type CloseReason = (typeof closeReasons)[number];

export interface ConnectionCounters {
  refused(reason: RefusalReason): void;
  closed(reason: CloseReason): void;
}

export function connectionCounters(kit: MetricsKit): ConnectionCounters {
  const refused = kit.counter({
    name: 'switchyard_connections_refused_total',
    help: 'Connections and upgrade handshakes of the main listener refused, by reason',
    labelNames: ['reason'] as const,
  });
  const closed = kit.counter({
    name: 'switchyard_connections_closed_total',
    help: 'Connections of the main listener closed by the service to protect the others, by reason',
    labelNames: ['reason'] as const,
  });
  for (const reason of refusalReasons) refused.inc({ reason }, 0);
  for (const reason of closeReasons) closed.inc({ reason }, 0);
  return {
    refused: (reason) => refused.inc({ reason }),
    closed: (reason) => closed.inc({ reason }),
  };
}
