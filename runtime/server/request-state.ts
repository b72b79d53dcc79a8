/**
 * The request state every way into a pipeline starts with (the request core, the upgrade path,
 * the test harness): one function, so that what `coreStateFields` promises is there whichever
 * way a request came in.
 */
import type { ServiceConfig } from '../config/types.ts';
import { newRequestTrace } from '../observability/request-trace.ts';
import type { CompiledRoute, ServiceGraph } from '../service/graph.ts';
import type { GatewayState } from '../state.ts';
import { randomHex } from '../util/random-hex.ts';

const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const zeroTraceId = '0'.repeat(32);

/** A request's state before routing: the route fields are the unmatched ones until `enterRoute`. */
export function newRequestState(config: ServiceConfig, requestId: string): GatewayState {
  return {
    requestId,
    service: config.service,
    route: 'unmatched',
    limits: {
      bodyBytes: config.limits.body_bytes,
      jsonDepth: config.limits.json_depth,
      answerBytes: config.limits.answer_bytes,
    },
    traceparent: undefined,
    trace: newRequestTrace(),
    annotations: {},
  };
}

/** The route's fields of the state, once the request is routed. */
export function enterRoute(state: GatewayState, route: CompiledRoute, graph: ServiceGraph): void {
  state.route = route.id;
  state.mode = route.mode;
  state.dialect = route.dialect ?? graph.dialect;
}

/** W3C trace context: keep the caller's trace id with a new span id, or start a new trace. */
export function childTraceparent(incoming: string): string {
  const m = incoming ? traceparentPattern.exec(incoming) : null;
  // A new trace: its id and the span id drawn at once (one hex string, cut in two).
  if (!m || m[1] === zeroTraceId) {
    const ids = randomHex(24);
    return `00-${ids.slice(0, 32)}-${ids.slice(32)}-${m ? m[3] : '01'}`;
  }
  return `00-${m[1]}-${randomHex(8)}-${m[3]}`;
}
