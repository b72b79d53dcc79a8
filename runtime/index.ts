/**
 * The runtime's public contract: the only module plugins import.
 */

export { jsonDepth, readBody, readJson, readJsonObject } from './body.ts';
export type { ErrorKind, GatewayErrorOptions } from './errors.ts';
export { GatewayError, isGatewayError, toGatewayError } from './errors.ts';
export type { MetricsKit } from './observability/metrics.ts';
export { latencyBuckets } from './observability/metrics.ts';
export type {
  HealthReport,
  JsonSchema,
  PluginDefinition,
  PluginEnv,
  ResourceDefinition,
  ResourceInstance,
  ServiceInfo,
  ServiceIntrospection,
  StageInstance,
} from './plugin.ts';
export { definePlugin, defineResource } from './plugin.ts';
export type {
  Caller,
  GatewayContext,
  GatewayState,
  JsonRpcId,
  JsonRpcRequest,
  Next,
  PolicyDecision,
  QomResult,
  ResolvedSType,
  RpcResponseHook,
  Stage,
  Violation,
} from './state.ts';
export type {
  HttpForwardRequest,
  HttpForwardResponse,
  HttpUpstream,
  RpcCallOptions,
  RpcUpstream,
  Upstream,
  UpstreamHealth,
} from './upstreams/types.ts';
export { isHttpUpstream, isRpcUpstream } from './upstreams/types.ts';
export { canonicalJson, sha256Hex } from './util/hash.ts';
