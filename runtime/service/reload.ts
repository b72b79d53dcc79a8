/**
 * Hot reload as a transaction: load and validate the file, build and warm a whole new graph, then
 * swap it in atomically (the coordinator retires the old one: drain.ts). Requests already running
 * finish on the graph they started on. A config that fails to load or build changes nothing.
 * Also the data reload (`POST /admin/reload?scope=data`): each part of the running graph re-reads
 * its own data, without rebuilding anything.
 */
import type { Logger } from 'pino';
import { type LoadedService, type LoadOptions, loadService } from '../config/load.ts';
import { ConfigError, type ConfigProblem } from '../config/source.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { ServiceInfo } from '../plugin.ts';
import type { TlsMaterial } from '../server/listener.ts';
import { loadTlsMaterial } from '../server/tls.ts';
import { buildGraph, type ServiceGraph } from './graph.ts';

export interface ReloadOutcome {
  ok: boolean;
  at: string;
  hash?: string;
  /** The previous hash, when the reload swapped in a new graph. */
  previous_hash?: string;
  changed?: boolean;
  error?: string;
  problems?: ConfigProblem[];
  warnings?: string[];
}

/** The service a reload rebuilds. */
export interface ReloadHost {
  readonly file: string;
  readonly options: LoadOptions & { warmupMs?: number };
  readonly logger: Logger;
  readonly metrics: MetricsKit;
  readonly info: ServiceInfo;
  /** The graph serving new requests now. */
  readonly graph: ServiceGraph;
  /**
   * Puts a built and warmed graph in service (the old one drains, then closes) with the renewed
   * certificate files of the main listener, when they were read (same paths as before).
   */
  swap(graph: ServiceGraph, loaded: LoadedService, tls: TlsMaterial | undefined): void;
}

export class ReloadTransaction {
  /** The outcome of the last reload, for the config-status endpoint. */
  last: ReloadOutcome | undefined;
  private running: Promise<ReloadOutcome> | undefined;

  constructor(private readonly host: ReloadHost) {}

  /** Reloads the config file. Concurrent calls share one reload. */
  run(): Promise<ReloadOutcome> {
    this.running ??= this.transaction().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async transaction(): Promise<ReloadOutcome> {
    const { host } = this;
    const at = new Date().toISOString();
    const old = host.graph;
    let outcome: ReloadOutcome;
    try {
      const loaded = await loadService(host.file, host.options);
      // Renewed certificate files (same paths) are picked up by a reload; unreadable ones refuse it.
      const tls = sameJson(old.loaded.config.listen.tls, loaded.config.listen.tls)
        ? loadTlsMaterial(loaded.config.listen.tls, loaded.configDir, loaded.file)
        : undefined;
      const graph = await buildGraph(loaded, {
        logger: host.logger,
        metrics: host.metrics,
        info: host.info,
        previous: old,
      });
      await warmGraph(graph, host.options.warmupMs, host.logger);
      host.swap(graph, loaded, tls);
      outcome = {
        ok: true,
        at,
        hash: loaded.hash,
        previous_hash: old.loaded.hash,
        changed: loaded.hash !== old.loaded.hash,
        warnings: listenerWarnings(old, graph),
      };
      host.logger.info({ hash: loaded.hash, changed: outcome.changed }, 'config reloaded');
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : undefined;
      outcome = { ok: false, at, hash: old.loaded.hash, error: (err as Error).message, problems };
      host.logger.error({ error: outcome.error }, 'config reload failed; the running config is unchanged');
    }
    this.last = outcome;
    return outcome;
  }

  /**
   * Calls `reload()` on every resource and stage of the running graph that has one (they re-read
   * their data: policy files, registries...), in build order, without rebuilding the graph. Each
   * keeps its current data when its own reload fails; the outcome lists what failed.
   */
  async data(): Promise<{ ok: boolean; reloaded: string[]; failed: Array<{ target: string; error: string }> }> {
    const graph = this.host.graph;
    const reloaded: string[] = [];
    const failed: Array<{ target: string; error: string }> = [];
    const targets: Array<[string, (() => Promise<void>) | undefined]> = [
      ...[...graph.resources].map(
        ([name, r]) => [`resource:${name}`, r.reload?.bind(r)] as [string, (() => Promise<void>) | undefined],
      ),
      ...graph.stages.map(
        (s) => [`stage:${s.id}`, s.instance.reload?.bind(s.instance)] as [string, (() => Promise<void>) | undefined],
      ),
    ];
    for (const [target, reload] of targets) {
      if (!reload) continue;
      try {
        await reload();
        reloaded.push(target);
      } catch (err) {
        failed.push({ target, error: (err as Error).message });
      }
    }
    const { logger } = this.host;
    if (failed.length > 0) logger.error({ failed }, 'data reload failed for some parts; they keep their data');
    else logger.info({ reloaded }, 'data reloaded');
    return { ok: failed.length === 0, reloaded, failed };
  }
}

/**
 * Waits (at most `warmupMs`, default 5 s) until each upstream's first check has an outcome: a
 * child process finishes its handshake, an HTTP upstream answers or refuses. An absent one is
 * reported at once and keeps being probed; health shows it. At start and before a reload's swap.
 */
export async function warmGraph(graph: ServiceGraph, warmupMs: number | undefined, logger: Logger): Promise<void> {
  const ms = warmupMs ?? 5000;
  await Promise.allSettled(
    [...graph.upstreams.values()].map(({ upstream: u }) => (u.checked ? u.checked(ms) : u.ready(ms))),
  );
  for (const [name, { upstream }] of graph.upstreams) {
    const health = upstream.health();
    if (!health.connected) {
      logger.warn(
        { upstream: name, reason: health.error },
        'upstream not reachable yet; serving anyway, probing in the background (health reports it)',
      );
    }
  }
}

function listenerWarnings(old: ServiceGraph, next: ServiceGraph): string[] {
  const a = old.loaded.config;
  const b = next.loaded.config;
  const warnings: string[] = [];
  for (const key of ['listen', 'metrics', 'admin'] as const) {
    if (JSON.stringify(a[key]) !== JSON.stringify(b[key]))
      warnings.push(`${key} changed: takes effect after a restart`);
  }
  if (JSON.stringify(a.logging) !== JSON.stringify(b.logging))
    warnings.push('logging changed: takes effect after a restart');
  if (JSON.stringify(a.tracing) !== JSON.stringify(b.tracing))
    warnings.push('tracing changed: takes effect after a restart');
  return warnings;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
