/**
 * A service graph: everything built from one version of a service's config — upstreams,
 * resources, stage instances and compiled routes. Hot reload builds a new graph next to the
 * running one and swaps it in; upstreams whose config did not change are carried over so that
 * child processes and connection pools survive the reload.
 */
import { isAbsolute, resolve } from 'node:path';
import { match as compilePath, type MatchFunction } from 'path-to-regexp';
import type { Logger } from 'pino';
import type { LoadedService } from '../config/load.ts';
import type { RouteConfig, StageConfig } from '../config/types.ts';
import { type Dialect, dialects } from '../dialects.ts';
import type { Mode } from '../mode.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { HealthReport, PluginEnv, ResourceInstance, ServiceInfo, StageInstance } from '../plugin.ts';
import type { Stage } from '../state.ts';
import { createUpstream } from '../upstreams/create.ts';
import type { Upstream } from '../upstreams/types.ts';
import { canonicalJson } from '../util/hash.ts';
import { type BuiltStage, composePipeline } from './pipeline.ts';
import { literalPathRoutes } from './route-table.ts';

export interface CompiledRoute {
  id: string;
  methods: Set<string>;
  /** The path pattern as configured (`/entities/:id`; `http.route` of its spans). */
  path: string;
  match: MatchFunction<Record<string, string | string[]>>;
  dialect: Dialect;
  mode?: Mode;
  handle: Stage;
  stages: BuiltStage[];
  /**
   * The pipeline of a dry run (runtime/dry-run.ts): each stage's dry-run handler, or the stage as
   * it is, or left out, as each declares; a string when a stage declares nothing (why it is refused).
   */
  dryRun: Stage | string;
}

export interface OwnedUpstream {
  upstream: Upstream;
  /** Canonical JSON of its config: equal config means the upstream is reused on reload. */
  key: string;
}

export interface ServiceGraph {
  loaded: LoadedService;
  info: ServiceInfo;
  routes: CompiledRoute[];
  /** The routes matching each path some route declares literally, in order (route-table.ts). */
  literalPaths: Map<string, CompiledRoute[]>;
  dialect: Dialect;
  upstreams: Map<string, OwnedUpstream>;
  resources: Map<string, ResourceInstance>;
  stages: BuiltStage[];
  builtAt: Date;
  /** Requests running on this graph; a replaced graph is closed once this reaches 0. */
  inflight: number;
}

export interface BuildDeps {
  logger: Logger;
  metrics: MetricsKit;
  info: ServiceInfo;
  /** The running graph, whose unchanged upstreams are reused. */
  previous?: ServiceGraph;
}

export async function buildGraph(loaded: LoadedService, deps: BuildDeps): Promise<ServiceGraph> {
  const { config, catalog } = loaded;
  const { logger, metrics, info } = deps;
  const resolvePath = (p: string) => (isAbsolute(p) ? p : resolve(loaded.configDir, p));
  const upstreams = new Map<string, OwnedUpstream>();
  const resources = new Map<string, ResourceInstance>();
  const stages: BuiltStage[] = [];
  const graph: ServiceGraph = {
    loaded,
    info,
    routes: [],
    literalPaths: new Map(),
    dialect: dialects[config.dialect] ?? dialects.simple!,
    upstreams,
    resources,
    stages,
    builtAt: new Date(),
    inflight: 0,
  };
  try {
    for (const [name, upstreamConfig] of Object.entries(config.upstreams)) {
      const key = canonicalJson(upstreamConfig);
      const old = deps.previous?.upstreams.get(name);
      if (old && old.key === key) {
        upstreams.set(name, old);
        continue;
      }
      const upstream = createUpstream(name, upstreamConfig as never, {
        logger: logger.child({ upstream: name }),
        configDir: loaded.configDir,
        metrics,
      });
      upstreams.set(name, { upstream, key });
    }

    const baseEnv: Omit<PluginEnv, 'stageId'> = {
      service: info,
      logger,
      metrics,
      resource<T>(name: string): T {
        const r = resources.get(name);
        if (!r) throw new Error(`unknown resource "${name}" (declare it under resources:)`);
        return r.value as T;
      },
      async resourceHealth(name: string): Promise<HealthReport | undefined> {
        const r = resources.get(name);
        if (!r) throw new Error(`unknown resource "${name}" (declare it under resources:)`);
        return r.health ? await r.health() : undefined;
      },
      upstream<T extends Upstream>(name: string): T {
        const u = upstreams.get(name);
        if (!u) throw new Error(`unknown upstream "${name}" (declare it under upstreams:)`);
        return u.upstream as T;
      },
      resolvePath,
      introspect: () => ({
        routes: graph.routes.map((r) => ({
          id: r.id,
          methods: [...r.methods],
          path: r.path,
          mode: r.mode,
          stages: r.stages.map((s) => ({ plugin: s.plugin, options: s.options })),
        })),
        resources: [...resources.keys()],
        upstreams: [...upstreams.keys()],
      }),
    };

    for (const [name, block] of Object.entries(config.resources)) {
      const { type, ...options } = block;
      const def = catalog.resource(type);
      if (!def) throw new Error(`resources.${name}: unknown resource type "${type}"`);
      try {
        resources.set(name, await def.create(options, { ...baseEnv, logger: logger.child({ resource: name }) }));
      } catch (err) {
        throw new Error(`resources.${name} (${type}): ${(err as Error).message}`, { cause: err });
      }
    }

    const buildStage = async (stage: StageConfig, routeId: string): Promise<BuiltStage> => {
      const def = catalog.stage(stage.plugin);
      if (!def) throw new Error(`unknown plugin "${stage.plugin}"`);
      const stageId = uniqueStageId(`${routeId}:${stage.plugin}`, stages);
      const env: PluginEnv = { ...baseEnv, logger: logger.child({ stage: stageId, route: routeId }), stageId };
      let made: StageInstance | Stage;
      try {
        made = await def.create(structuredClone(stage.options), env);
      } catch (err) {
        throw new Error(`${routeId}: stage ${stage.plugin}: ${(err as Error).message}`, { cause: err });
      }
      const instance = typeof made === 'function' ? { handle: made } : made;
      const built = {
        id: stageId,
        plugin: stage.plugin,
        onError: stage.onError,
        onUninspectable: stage.onUninspectable,
        instance,
        options: stage.options,
        dryRun: def.dryRun,
      };
      stages.push(built);
      return built;
    };

    // Service-wide stages are built once and shared by every route (one rate-limit counter,
    // one auth table), then each route's own stages follow.
    const shared: BuiltStage[] = [];
    for (const s of config.pipeline) shared.push(await buildStage(s, 'service'));
    for (const route of config.routes)
      graph.routes.push(await compileRoute(route, shared, buildStage, deps, config.mode));
    graph.literalPaths = literalPathRoutes(graph.routes);
    return graph;
  } catch (err) {
    // A graph that fails to build is torn down; the running one is untouched.
    await closeGraph(graph, deps.previous);
    throw err;
  }
}

/**
 * Stage ids label metrics, logs and health entries, so they must not collide: the same plugin a
 * second time in one pipeline gets `<route id>:<plugin>.2`, then `.3`. Ids follow config order,
 * so they are the same after every rebuild of an unchanged config.
 */
function uniqueStageId(base: string, built: BuiltStage[]): string {
  const taken = new Set(built.map((s) => s.id));
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}.${n}`;
  return id;
}

async function compileRoute(
  route: RouteConfig,
  shared: BuiltStage[],
  buildStage: (s: StageConfig, routeId: string) => Promise<BuiltStage>,
  deps: BuildDeps,
  serviceMode: Mode | undefined,
): Promise<CompiledRoute> {
  const built: BuiltStage[] = [...shared];
  for (const s of route.pipeline) built.push(await buildStage(s, route.id));
  return {
    id: route.id,
    methods: new Set(route.methods),
    path: route.path,
    match: compilePath(route.path, { decode: decodeURIComponent }),
    dialect: dialects[route.dialect ?? ''] ?? dialects.simple!,
    mode: route.mode ?? serviceMode,
    // Stages that do nothing as configured (inactive) are not on the request path.
    handle: composePipeline(
      built.filter((s) => !s.instance.inactive),
      deps.metrics,
      deps.logger,
    ),
    stages: built,
    dryRun: dryRunPipeline(built, deps),
  };
}

/** A route's dry-run pipeline (see CompiledRoute.dryRun), composed at load like the real one. */
function dryRunPipeline(built: BuiltStage[], deps: BuildDeps): Stage | string {
  const stages: BuiltStage[] = [];
  for (const s of built) {
    if (s.instance.inactive) continue;
    if (s.instance.dryRun) stages.push({ ...s, instance: { ...s.instance, handle: s.instance.dryRun } });
    else if (s.dryRun === 'run') stages.push(s);
    else if (s.dryRun !== 'skip') {
      return `stage ${s.id} (${s.plugin}) may act outside the request and has no dry-run behaviour`;
    }
  }
  return composePipeline(stages, deps.metrics, deps.logger);
}

/** What each resource describes of itself (for reload reports and status pages). */
export function describeResources(graph: ServiceGraph): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, r] of graph.resources) out[name] = r.describe?.() ?? {};
  return out;
}

/** Health of every upstream, resource and stage that reports one. */
export async function graphHealth(graph: ServiceGraph): Promise<Record<string, HealthReport>> {
  const out: Record<string, HealthReport> = {};
  for (const [name, { upstream }] of graph.upstreams) {
    const h = upstream.health();
    out[`upstream:${name}`] = {
      ok: h.connected,
      status: h.connected ? 'connected' : 'disconnected',
      error: h.error,
      // A balanced upstream: how it balances, each endpoint's state, active check, failures and ejections.
      ...(h.detail?.endpoints ? { detail: { balance: h.detail.balance, endpoints: h.detail.endpoints } } : {}),
    };
  }
  for (const [name, r] of graph.resources) if (r.health) out[`resource:${name}`] = await r.health();
  for (const s of graph.stages) if (s.instance.health) out[`stage:${s.id}`] = await s.instance.health();
  return out;
}

/** Closes what this graph owns; upstreams shared with `keep` (the graph that replaced it) stay. */
export async function closeGraph(graph: ServiceGraph, keep?: ServiceGraph): Promise<void> {
  const kept = new Set([...(keep?.upstreams.values() ?? [])].map((u) => u.upstream));
  const jobs: Array<Promise<unknown>> = [];
  for (const s of graph.stages) if (s.instance.close) jobs.push(s.instance.close());
  for (const r of graph.resources.values()) if (r.close) jobs.push(r.close());
  for (const { upstream } of graph.upstreams.values()) if (!kept.has(upstream)) jobs.push(upstream.close());
  await Promise.allSettled(jobs);
}
