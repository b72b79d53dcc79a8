/**
 * What a service reports of itself on its admin listener: what is running now (GET /admin/config,
 * and each worker's part of it in cluster mode) and the health of everything in its graph
 * (GET /admin/health).
 */
import type { HealthReport, ServiceInfo } from '../plugin.ts';
import type { GraphDrain } from './drain.ts';
import { graphHealth, type ServiceGraph } from './graph.ts';
import type { ReloadOutcome } from './reload.ts';

/** Health of everything in `graph`: ok when every check is. */
export async function serviceHealth(
  graph: ServiceGraph,
): Promise<{ ok: boolean; checks: Record<string, HealthReport> }> {
  const checks = await graphHealth(graph);
  return { ok: Object.values(checks).every((c) => c.ok), checks };
}

/** What is running now, for the config-status endpoint. */
export function serviceStatus(
  service: { info: ServiceInfo; file: string; graph: ServiceGraph },
  drain: GraphDrain,
  lastReload: ReloadOutcome | undefined,
): Record<string, unknown> {
  const { info, graph: g } = service;
  return {
    service: info.name,
    version: info.version,
    file: service.file,
    config_hash: g.loaded.hash,
    loaded_at: g.builtAt.toISOString(),
    started_at: info.startedAt.toISOString(),
    ports: info.ports,
    upstreams: [...g.upstreams.entries()].map(([name, u]) => ({
      name,
      kind: u.upstream.kind,
      ...u.upstream.health(),
    })),
    resources: [...g.resources.keys()],
    plugins: [...new Set(g.stages.map((s) => s.plugin))].sort(),
    routes: g.routes.map((r) => ({
      id: r.id,
      dialect: r.dialect.name,
      mode: r.mode,
      stages: r.stages.map((s) => ({ plugin: s.plugin, on_error: s.onError, ...(s.instance.describe?.() ?? {}) })),
    })),
    in_flight: g.inflight,
    open_responses: drain.openOn(g),
    draining_graphs: drain.draining,
    last_reload: lastReload ?? null,
  };
}
