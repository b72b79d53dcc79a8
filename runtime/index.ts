/**
 * The runtime's public contract: the only module plugins import.
 */

export {
  Answer,
  type AnswerInit,
  answerOf,
  type ReadTimeout,
  type RespondInit,
  readWhole,
  respond,
} from './answer/answer.ts';
export type { SseEvent, SseFilter, SseVerdict } from './answer/event-stream.ts';
export { type OnUninspectable, uncheckedHeader } from './answer/guard.ts';
export { StageAnswer } from './answer/stage-answer.ts';
export { isUninspectable, type UncheckedReason, UninspectableAnswer } from './answer/uninspectable.ts';
export {
  jsonDepth,
  readBody,
  readJson,
  readJsonObject,
  requireJsonContentType,
  withJson,
  withJsonObject,
} from './body.ts';
export { isLoopbackHost } from './config/exposure.ts';
export { recordDecision } from './decisions.ts';
export type { Dialect, RenderedError } from './dialects.ts';
export type { DryRun, DryRunAnswer, DryRunObservation, DryRunRequest, DryRunResult } from './dry-run.ts';
export type { ErrorKind, GatewayErrorOptions } from './errors.ts';
export { GatewayError, isGatewayError, toGatewayError } from './errors.ts';
export {
  type BodyChange,
  bodyChangeOf,
  hopByHopHeaders,
  replacedBody,
  requestOf,
  type UpstreamRequest,
} from './exchange/request.ts';
export { effectiveMode, enforcementModes, type Mode } from './mode.ts';
export type { MetricsKit } from './observability/metrics.ts';
export { labelledSeries, latencyBuckets } from './observability/metrics.ts';
export type {
  Contract,
  FromSchema,
  HealthReport,
  JsonSchema,
  PluginDefinition,
  PluginEnv,
  RequestHeader,
  ResourceDefinition,
  ResourceInstance,
  ServiceInfo,
  ServiceIntrospection,
  StageInstance,
  StateField,
  StateFields,
  UpgradedConnection,
  UpgradeInfo,
} from './plugin.ts';
export { coreStateFields, definePlugin, defineResource, requestHeader, stateFieldOf, syncStage } from './plugin.ts';
export type { ClientConnection, ConnectionsSnapshot } from './server/connections.ts';
export { addressKey, sessionOwner, subjectOf } from './session-owner.ts';
export type {
  Caller,
  GatewayContext,
  GatewayState,
  JsonRpcId,
  JsonRpcRequest,
  Next,
  PolicyDecision,
  ProviderFailure,
  ProvidersTried,
  Stage,
  StageNext,
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
// The MCP protocol version the gateway asks for in its own sessions (stdio children, MCP over HTTP).
export { dropUpstreamAnswer } from './upstreams/drop-answer.ts';
export { MCP_PROTOCOL_VERSION } from './upstreams/jsonrpc-http.ts';
export { sessionTagSecret } from './upstreams/session-tags.ts';
export { sseData } from './upstreams/sse.ts';
export type {
  HttpForwardRequest,
  HttpForwardResponse,
  HttpUpstream,
  RpcCallOptions,
  RpcSessions,
  RpcUpstream,
  ServerMessageListener,
  SessionMode,
  SessionOwner,
  Upstream,
  UpstreamHealth,
} from './upstreams/types.ts';
export { isHttpUpstream, isRpcUpstream } from './upstreams/types.ts';
export { ClientAbort } from './util/client-abort.ts';
export { type Deadline, deadline } from './util/deadline.ts';
export { canonicalJson, sha256Hex } from './util/hash.ts';
export { publicReason } from './util/public-reason.ts';
export type { Violation } from './util/schema-errors.ts';
export { describeSchemaError, pointerSegments, schemaFieldName, toViolations } from './util/schema-errors.ts';
export { compileStatePath, type StateReader } from './util/state-path.ts';
export { TurnBatch } from './util/turn-batch.ts';
export { startTypeScriptWorker } from './util/typescript-worker.ts';
// Readers of the wire formats the runtime speaks (dialects and upstream kinds openai, jsonrpc).
export * as jsonrpcWire from './wire/jsonrpc.ts';
export { decodeMcpHeaderValue, encodeMcpHeaderValue, mcpNameOf, mcpNameSources } from './wire/mcp-headers.ts';
export * as openaiWire from './wire/openai.ts';
export {
  type ChunkVerdict,
  chunkOf,
  OpenAIChunk,
  OpenAIStreamFilter,
  type OpenAIStreamOptions,
  type OpenAIStreamReader,
  openaiStreamData,
  TextWindow,
} from './wire/openai-stream.ts';
export {
  expectRpcResponse,
  mapRpcResponses,
  type RpcMessage,
  type RpcResponseMap,
  readRpcResponse,
} from './wire/rpc-answer.ts';
