/**
 * What a request carries for tracing and the gateway-overhead metric (`ctx.state.trace`): the
 * time spent waiting on upstreams, and, when tracing is on, the tracer and the current span
 * (server span, then each stage's span while it runs) that upstream calls become children of.
 * Callers of an upstream pass it along (`HttpForwardRequest.trace`, `RpcCallOptions.trace`).
 */
import type { Span, Tracer } from '@opentelemetry/api';

export interface RequestTrace {
  /** Nanoseconds during which at least one upstream call of this request was open (overlaps count once). */
  upstreamNs: number;
  /** Upstream calls open now, and since when (process.hrtime) the first of them is. */
  open: number;
  openSince: bigint;
  tracer?: Tracer;
  /** The innermost span open now; an upstream call's client span is its child. */
  span?: Span;
}

export function newRequestTrace(): RequestTrace {
  return { upstreamNs: 0, open: 0, openSince: 0n };
}

export function upstreamCallStarted(t: RequestTrace): void {
  if (t.open++ === 0) t.openSince = process.hrtime.bigint();
}

export function upstreamCallEnded(t: RequestTrace): void {
  if (--t.open === 0) t.upstreamNs += Number(process.hrtime.bigint() - t.openSince);
}
