/**
 * The plugin contract. A plugin is a stage factory: its options are validated against its JSON
 * Schema before anything starts, `create` runs once when the service graph is built (compile
 * schemas, open stores, load models) and returns the per-request middleware.
 * A resource type is the same idea for things several stages share (a registry, a store...).
 */
import type { Logger } from 'pino';
import type { MetricsKit } from './observability/metrics.ts';
import type { GatewayContext, Stage } from './state.ts';
import type { Upstream } from './upstreams/types.ts';

export type JsonSchema = Record<string, unknown>;

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
  startedAt: Date;
}

export interface PluginEnv {
  service: ServiceInfo;
  /** Logger bound to this stage (`stage` field set). Never log secrets or raw prompts. */
  logger: Logger;
  metrics: MetricsKit;
  /** A shared resource declared under `resources:` in the service config. */
  resource<T = unknown>(name: string): T;
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
  routes: Array<{ id: string; methods: string[]; mode?: string; stages: Array<{ plugin: string; options: unknown }> }>;
  resources: string[];
  upstreams: string[];
}

export interface StageInstance {
  handle: Stage;
  health?(): HealthReport | Promise<HealthReport>;
  /** Re-read external data (policy files...) without rebuilding the graph. */
  reload?(): Promise<void>;
  close?(): Promise<void>;
  /** What this stage does, for the config-status endpoint and capabilities. */
  describe?(): Record<string, unknown>;
}

export interface PluginDefinition<O = Record<string, unknown>> {
  kind: 'stage';
  name: string;
  description: string;
  /** JSON Schema (draft 2020-12) of the options; defaults in it are applied. */
  options: JsonSchema;
  create(options: O, env: PluginEnv): StageInstance | Stage | Promise<StageInstance | Stage>;
}

export interface ResourceInstance<V = unknown> {
  value: V;
  health?(): HealthReport | Promise<HealthReport>;
  reload?(): Promise<void>;
  close?(): Promise<void>;
  describe?(): Record<string, unknown>;
}

export interface ResourceDefinition<O = Record<string, unknown>, V = unknown> {
  kind: 'resource';
  /** Resource type named in config: `resources: { name: { type: <type>, ...options } }`. */
  type: string;
  description: string;
  options: JsonSchema;
  create(options: O, env: Omit<PluginEnv, 'stageId'>): ResourceInstance<V> | Promise<ResourceInstance<V>>;
}

export function definePlugin<O = Record<string, unknown>>(def: Omit<PluginDefinition<O>, 'kind'>): PluginDefinition<O> {
  return { kind: 'stage', ...def };
}

export function defineResource<O = Record<string, unknown>, V = unknown>(
  def: Omit<ResourceDefinition<O, V>, 'kind'>,
): ResourceDefinition<O, V> {
  return { kind: 'resource', ...def };
}

export type AnyDefinition = PluginDefinition<never> | ResourceDefinition<never, unknown>;

export type { GatewayContext, Stage };
