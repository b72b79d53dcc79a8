/**
 * Wraps an upstream's calls in place: `forward` of an HTTP upstream, `call` of a JSON-RPC one,
 * `close` of any. The one way the runtime layers behaviour around upstream calls (tracing and
 * timing, circuit breaking, request slots), so every layer sees the same contract and the upstream
 * classes stay unaware of them. Each wrapper gets the previous function, bound.
 */
import type { HttpUpstream, RpcUpstream, Upstream } from './types.ts';

export interface AroundCalls {
  forward?: (next: HttpUpstream['forward']) => HttpUpstream['forward'];
  call?: (next: RpcUpstream['call']) => RpcUpstream['call'];
  close?: (next: Upstream['close']) => Upstream['close'];
}

export function around<U extends Upstream>(upstream: U, wrap: AroundCalls): U {
  const http = upstream as U & Partial<HttpUpstream>;
  const rpc = upstream as U & Partial<RpcUpstream>;
  if (wrap.forward && typeof http.forward === 'function') http.forward = wrap.forward(http.forward.bind(upstream));
  if (wrap.call && typeof rpc.call === 'function') rpc.call = wrap.call(rpc.call.bind(upstream));
  if (wrap.close) upstream.close = wrap.close(upstream.close.bind(upstream));
  return upstream;
}
