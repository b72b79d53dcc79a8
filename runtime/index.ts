/**
 * The runtime's public contract: the only module plugins import.
 */

export { jsonDepth, readBody, readJson, readJsonObject } from './body.ts';
export type { Dialect, RenderedError } from './dialects.ts';
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
  UpgradedConnection,
  UpgradeInfo,
} from './plugin.ts';
export { definePlugin, defineResource } from './plugin.ts';
export type { ClientConnection, ConnectionsSnapshot } from './server/connections.ts';
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
  ResponseJsonHook,
  RpcResponseHook,
  SseEvent,
  SseFilter,
  SseFilterFactory,
  SseVerdict,
  Stage,
  Violation,
} from './state.ts';
export type {
  ChangeRecord,
  Entity,
  EntityOperations,
  EntityStore,
  EntityStoreObserver,
  EntityStoreOptions,
  FieldCondition,
  Filter,
  MutationEvent,
  MutationOptions,
  PostgresOptions,
  QueryBudget,
  QueryEvent,
  QueryOptions,
  QueryResult,
  SqlDatabase,
  SqlExecutor,
  SqliteOptions,
  SqlOptions,
  SqlParam,
  SqlRow,
  TransactionOptions,
  TransactionRunOptions,
} from './store/index.ts';
export {
  DuplicateKeyError,
  InvalidQueryError,
  openEntityStore,
  openSqlDatabase,
  QueryBudgetExceededError,
  ReadOnlyStoreError,
  ReplicationGapError,
  StorageBusyError,
  VersionConflictError,
  WriteConflictError,
} from './store/index.ts';
export { sseData } from './upstreams/sse.ts';
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
export { ClientAbort } from './util/client-abort.ts';
export { type Deadline, deadline } from './util/deadline.ts';
export { canonicalJson, sha256Hex } from './util/hash.ts';
export { compileStatePath, type StateReader } from './util/state-path.ts';
export { TurnBatch } from './util/turn-batch.ts';
// Readers of the wire formats the runtime speaks (dialects and upstream kinds openai, jsonrpc).
export * as jsonrpcWire from './wire/jsonrpc.ts';
export * as openaiWire from './wire/openai.ts';
