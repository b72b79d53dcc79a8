/**
 * The plugin contract. A plugin is a stage factory: its options are validated against its JSON
 * Schema before anything starts, `create` runs once when the service graph is built (compile
 * schemas, open stores, load models) and returns the per-request middleware.
 * A resource type is the same idea for things several stages share (a registry, a store...).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { OnUninspectable } from './answer/guard.ts';
import { withDefaults } from './config/options.ts';
import type { DryRunRequest, DryRunResult } from './dry-run.ts';
import type { GatewayError } from './errors.ts';
import type { Mode } from './mode.ts';
import type { MetricsKit } from './observability/metrics.ts';
import type { ConnectionsSnapshot } from './server/connections.ts';
import type { GatewayContext, GatewayState, Stage } from './state.ts';
import type { Upstream } from './upstreams/types.ts';

export type { FromSchema } from './config/from-schema.ts';

/** A JSON Schema (draft 2020-12). Write an options schema `as const satisfies JsonSchema` to infer its type. */
export type JsonSchema = Readonly<Record<string, unknown>>;

export interface HealthReport {
  ok: boolean;
  /** Short status word for reports, e.g. `connected`, `loaded`, `loading`. */
  status: string;
  error?: string;
  detail?: Record<string, unknown>;
}

export interface ServiceInfo {
  name: string;
  version: string;
  /** Directory of the service's config file; relative paths in options resolve against it. */
  configDir: string;
  ports: { main?: number; metrics?: number; admin?: number };
  /**
   * Base URL at which this process reaches its own main listener (`http://127.0.0.1:<port>` when
   * it listens on all interfaces), for stages that call another route of the same service. Set
   * once the listener is up: read it per request.
   */
  mainUrl?: string;
  startedAt: Date;
  /**
   * True when a listener of this service binds beyond loopback: development credentials (keys in
   * clear, `${VAR:~default}`) are refused then (see docs/configuration.md).
   */
  exposed?: boolean;
  /**
   * Requests this process refused before any pipeline ran (Host/Origin, no route: 404/405, over
   * `limits.max_concurrent`: 503), counted by the request core; stages never see them.
   */
  refusedRequests?: number;
  /**
   * Reloads the whole service as a transaction (as POST /admin/reload on the admin listener
   * does): the new graph is built and warmed, then swapped in; a config or data file that fails
   * to load changes nothing. Set once the service runs.
   */
  reload?: () => Promise<ServiceReloadResult>;
  /**
   * Client connections of the main listener now: counts, the maximum (`limits.max_connections`)
   * and one entry per open connection. Set once the service runs (this process's connections
   * only: in cluster mode, this worker's).
   */
  connections?: () => ConnectionsSnapshot;
  /**
   * Runs a request through a route of this service as a dry run (runtime/dry-run.ts): the real
   * pipeline, without side effects. Set once the service runs.
   */
  dryRun?: (request: DryRunRequest) => Promise<DryRunResult>;
}

export interface ServiceReloadResult {
  ok: boolean;
  error?: string;
  problems?: Array<{ file?: string; line?: number; column?: number; path?: string; message: string }>;
  /** What each resource of the graph now running describes of itself (its `describe()`). */
  resources: Record<string, Record<string, unknown>>;
}

export interface PluginEnv {
  service: ServiceInfo;
  /** Logger bound to this stage (`stage` field set). Never log secrets or raw prompts. */
  logger: Logger;
  metrics: MetricsKit;
  /** A shared resource declared under `resources:` in the service config. */
  resource<T = unknown>(name: string): T;
  /** Health of a declared resource (undefined when it reports none), for readiness checks. */
  resourceHealth(name: string): Promise<HealthReport | undefined>;
  /** An upstream declared under `upstreams:`. */
  upstream<T extends Upstream = Upstream>(name: string): T;
  /** Resolves a path from the config against the config file's directory. */
  resolvePath(path: string): string;
  /**
   * What the running service is made of (routes and their stages), for stages that report on
   * it (capabilities, status pages). Call it per request: the graph is complete only after build.
   */
  introspect(): ServiceIntrospection;
  /** Identifier of this stage instance, e.g. `typed-proxy:POST /:schema-validate`. */
  stageId: string;
}

export interface ServiceIntrospection {
  routes: Array<{
    id: string;
    methods: string[];
    path: string;
    mode?: Mode;
    stages: Array<{ plugin: string; options: unknown }>;
  }>;
  resources: string[];
  upstreams: string[];
}

export interface StageInstance {
  handle: Stage;
  health?(): HealthReport | Promise<HealthReport>;
  /** Re-read external data (policy files...) without rebuilding the graph. */
  reload?(): Promise<void>;
  close?(): Promise<void>;
  /**
   * Called when the service has gone idle after its memory grew (runtime/service/idle-trim.ts),
   * right after the main thread's garbage collection: return what can be returned, e.g. ask
   * worker threads to collect their own heaps. Never called while a request is in flight.
   */
  trimMemory?(): void | Promise<void>;
  /** What this stage does, for the config-status endpoint and capabilities. */
  describe?(): Record<string, unknown>;
  /**
   * True when the stage, as configured, does nothing (e.g. `enabled: false`): it is left out of
   * the request path (it still describes itself), so a feature switched off costs no time per
   * request. `handle` must then be a pass-through, as it is still what the stage means.
   */
  inactive?: boolean;
  /**
   * Takes over an HTTP upgrade request (a WebSocket handshake) that matched this stage's route.
   * Only this hook runs for it, not the route's other stages. Resolve once the handshake is
   * answered (e.g. `101 Switching Protocols`); throw a GatewayError to refuse it, and the runtime
   * answers with the route's dialect and closes the connection. The socket then counts as in
   * flight until it closes. A plain (non-upgrade) request on the route still goes to `handle`.
   */
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer, info: UpgradeInfo): Promise<UpgradedConnection>;
  /**
   * What the stage does in a dry run instead of `handle` (runtime/dry-run.ts), when it has an effect
   * outside the request: answer without calling the upstream, resolve the identity the dry run
   * names, keep the records it would write on `ctx.state.dryRun`. Else the plugin's `dryRun` says.
   */
  dryRun?: Stage;
}

export interface UpgradeInfo {
  /**
   * The upgrade request's context: headers (`ctx.get`), `ctx.params`, `ctx.ip`, `ctx.state`
   * (`requestId`, `route`, `limits`). Its response is not connected: answer on the socket or throw.
   */
  ctx: GatewayContext;
  /** An error as the route's dialect writes it, for errors sent inside the new protocol (a frame). */
  renderError(err: GatewayError): { status: number; body: unknown };
}

export interface UpgradedConnection {
  /**
   * The service is stopping and the drain timeout has passed: close now, gracefully (a WebSocket
   * sends close code 1001). The runtime destroys the socket if it is still open shortly after.
   */
  shutdown(): void;
}

/** A field of the request state (`ctx.state`), as `needs` and `provides` name them. */
export type StateField = Extract<keyof GatewayState, string>;

/**
 * Fields the request core sets on every request before the pipeline runs: a stage may read them
 * without any earlier stage providing them.
 */
export const coreStateFields: readonly StateField[] = [
  'requestId',
  'service',
  'route',
  'mode',
  'limits',
  'traceparent',
  'dialect',
  'annotations',
];

/**
 * Options as a config writes them: any property may be left out (its schema default, if any, is
 * applied before the plugin's `create`; a missing required one is refused then).
 */
export type WrittenOptions<O> = [O] extends [never]
  ? never
  : O extends readonly (infer E)[]
    ? WrittenOptions<E>[]
    : O extends object
      ? { [K in keyof O]?: WrittenOptions<O[K]> }
      : O;

/** What `definePlugin` takes: the plugin's own `create` receives the complete options. */
export type PluginSpec<O> = Omit<PluginDefinition<O>, 'kind' | 'create'> & {
  create(options: O, env: PluginEnv): StageInstance | Stage | Promise<StageInstance | Stage>;
};

/** What `defineResource` takes: the resource's own `create` receives the complete options. */
export type ResourceSpec<O, V> = Omit<ResourceDefinition<O, V>, 'kind' | 'create'> & {
  create(options: O, env: Omit<PluginEnv, 'stageId'>): ResourceInstance<V> | Promise<ResourceInstance<V>>;
};

/**
 * A request header as `needs` and `provides` name it (`requestHeader(name)`): one a stage sets on
 * the request that goes upstream, or one it reads that an earlier stage must have set.
 */
export type RequestHeader = `header:${string}`;

/** What `needs` and `provides` name: a request-state field or a request header. */
export type Contract = StateField | RequestHeader;

/** The `needs` / `provides` entry of a request header (names are case-insensitive). */
export function requestHeader(name: string): RequestHeader {
  return `header:${name.toLowerCase()}`;
}

/** State fields (and request headers): a fixed list, or one worked out from the stage's validated options (defaults applied). */
export type StateFields<O> = readonly Contract[] | ((options: O) => readonly Contract[]);

export interface PluginDefinition<O = Record<string, unknown>> {
  kind: 'stage';
  name: string;
  description: string;
  /** JSON Schema (draft 2020-12) of the options; defaults in it are applied. */
  options: JsonSchema;
  /**
   * Request-state fields this stage reads that an EARLIER stage of the request path must write
   * (the request core's fields, `coreStateFields`, need no provider). Only what the stage cannot
   * do its job without: a field it reads when present and does without otherwise is not a need.
   * The loader refuses a pipeline where no earlier stage provides a need.
   */
  needs?: StateFields<O>;
  /**
   * Request-state fields this stage writes for the stages after it, and request headers it sets
   * on the request that goes upstream (`requestHeader(name)`): a need of a later stage, and no
   * other stage of the path may set the same header.
   */
  provides?: StateFields<O>;
  /**
   * Plugin names of stages this stage must wrap: where one of them is on the same request path,
   * it must run AFTER this stage, so that it runs inside this one (this stage's code after
   * `next()` sees what it did, its answer phase included). The loader refuses a path where such a
   * stage runs first, naming both stages and the route. E.g. `audit` wraps `policy`: a decision
   * policy takes is on record before the client sees the answer.
   */
  wraps?: readonly string[];
  /**
   * In a dry run (runtime/dry-run.ts): `run` — the stage has no effect outside the request (it
   * reads, checks, decides), so it runs as it is; `skip` — it is left out (a counter a dry run must
   * not move, e.g. a rate limit). Unset, and no `dryRun` handler on the instance: a route with the
   * stage cannot be dry-run (refused, naming it).
   */
  dryRun?: 'run' | 'skip';
  /**
   * What the stage does with an answer it must read and cannot, when its config says nothing
   * (`on_uninspectable`): `refuse` unless declared. A pure observer (a counter, a log) that
   * checks nothing declares `pass`; a stage that checks answers leaves it at `refuse`.
   */
  onUninspectable?: OnUninspectable;
  /**
   * Builds the stage. Call it with options as a config writes them (defaults may be left out):
   * `definePlugin` validates them and applies the schema's defaults before the plugin's own
   * `create`, which receives the complete options (`O`).
   */
  create(options: WrittenOptions<O>, env: PluginEnv): StageInstance | Stage | Promise<StageInstance | Stage>;
}

/** A stage's `needs` or `provides` for the given options. */
export function stateFields<O>(fields: StateFields<O> | undefined, options: O): readonly Contract[] {
  if (fields === undefined) return [];
  return typeof fields === 'function' ? fields(options) : fields;
}

/**
 * The state field a dotted state path (an option such as `select_from: caller.attributes.policy`)
 * reads: its first segment. A stage whose option reads such a path needs that field.
 */
export function stateFieldOf(path: string | undefined): StateField[] {
  if (!path) return [];
  return [path.split('.')[0] as StateField];
}

export interface ResourceInstance<V = unknown> {
  value: V;
  health?(): HealthReport | Promise<HealthReport>;
  reload?(): Promise<void>;
  close?(): Promise<void>;
  /**
   * Called when the service has gone idle after its memory grew (runtime/service/idle-trim.ts),
   * right after the main thread's garbage collection: return what can be returned, e.g. ask
   * worker threads to collect their own heaps. Never called while a request is in flight.
   */
  trimMemory?(): void | Promise<void>;
  describe?(): Record<string, unknown>;
}

export interface ResourceDefinition<O = Record<string, unknown>, V = unknown> {
  kind: 'resource';
  /** Resource type named in config: `resources: { name: { type: <type>, ...options } }`. */
  type: string;
  description: string;
  options: JsonSchema;
  /** Call it with options as written (defaults may be left out); see PluginDefinition.create. */
  create(
    options: WrittenOptions<O>,
    env: Omit<PluginEnv, 'stageId'>,
  ): ResourceInstance<V> | Promise<ResourceInstance<V>>;
}

/**
 * A stage written without `async`: one that awaits nothing before it returns next()'s promise
 * (or throws a decision). What it throws rejects, as an async stage's would; it makes no promise
 * of its own per request, where an async one makes its frame's and one more to adopt next()'s
 * (docs/performance.md, "Work per request").
 */
export function syncStage(stage: Stage): Stage {
  return (ctx, next) => {
    try {
      return stage(ctx, next);
    } catch (err) {
      return Promise.reject(err);
    }
  };
}

/**
 * A stage plugin. Its `create` is wrapped so that it always receives its options validated against
 * `options` with the schema's defaults applied (a copy), whoever calls it: the service graph, a hot
 * reload or a test calling `create({...})` directly. So a plugin never repeats a schema default
 * (`options.x ?? 30`): the schema is the one place a default is written. Type the options with
 * `FromSchema<typeof schema>` from a schema written `as const` (docs/plugins.md).
 */
export function definePlugin<O = Record<string, unknown>>(def: PluginSpec<O>): PluginDefinition<O> {
  const create = def.create;
  return {
    kind: 'stage',
    ...def,
    create: (options, env) => create(withDefaults<O>(def.options, options, `plugin "${def.name}"`), env),
  };
}

/** A resource type; its `create` receives its options defaulted as a plugin's does (definePlugin). */
export function defineResource<O = Record<string, unknown>, V = unknown>(
  def: ResourceSpec<O, V>,
): ResourceDefinition<O, V> {
  const create = def.create;
  return {
    kind: 'resource',
    ...def,
    create: (options, env) => create(withDefaults<O>(def.options, options, `resource type "${def.type}"`), env),
  };
}

export type AnyDefinition = PluginDefinition<never> | ResourceDefinition<never, unknown>;

export type { GatewayContext, Stage };
