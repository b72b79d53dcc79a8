/**
 * The primary's admin listener fans out to the workers: `POST /admin/reload` reloads the service
 * in every worker (each runs the transaction on its own graph) and answers ok only if every worker
 * reloaded; `GET /admin/config` and `GET /admin/health` show every worker, summed or merged.
 */
import type { Logger } from 'pino';
import type { AdminTarget } from '../server/admin.ts';
import type { ReloadOutcome } from '../service/reload.ts';
import type { WorkerSupervisor } from './supervisor.ts';

export type ClusterReloadOutcome = ReloadOutcome & { workers: Array<Record<string, unknown>> };

export class ClusterAdmin {
  constructor(
    private readonly supervisor: WorkerSupervisor,
    /** Service names, in file order. */
    private readonly name: (i: number) => string | undefined,
    /** Ports of service `i` on the primary (main, metrics, admin). */
    private readonly ports: (i: number) => object | undefined,
    private readonly workersConfigured: number,
    private readonly logger: Logger,
  ) {}

  /** Reloads service `i` in every worker; ok only if every worker reloaded. */
  async reload(i: number): Promise<ClusterReloadOutcome> {
    const answers = await this.supervisor.ask<ReloadOutcome>('reload', i);
    const at = new Date().toISOString();
    const outcomes = answers.map(({ slot, result }) =>
      result.status === 'fulfilled'
        ? { worker_id: slot.worker?.id, ...result.value }
        : { worker_id: slot.worker?.id, ok: false, at, error: String((result.reason as Error).message) },
    );
    const failed = outcomes.find((o) => !o.ok);
    const first = failed ?? outcomes[0];
    if (!first) return { ok: false, at, error: 'no worker is running', workers: [] };
    const { worker_id: _, ...summary } = first;
    const workers = outcomes.map((o) => ({ worker_id: o.worker_id, ok: o.ok, hash: o.hash, error: o.error }));
    const name = this.name(i);
    if (failed) this.logger.error({ service: name, error: failed.error }, 'cluster reload failed in a worker');
    else this.logger.info({ service: name, hash: summary.hash, workers: workers.length }, 'cluster reloaded');
    return { ...summary, ok: !failed, workers };
  }

  /** What the primary's admin listener of service `i` serves. */
  target(i: number): AdminTarget {
    return {
      status: () => this.status(i),
      reload: () => this.reload(i),
      health: () => this.health(i),
    };
  }

  private async status(i: number): Promise<Record<string, unknown>> {
    const answers = await this.supervisor.ask<Record<string, unknown>>('status', i);
    const statuses = answers.flatMap(({ result }) => (result.status === 'fulfilled' ? [result.value] : []));
    const { worker_id: _w, pid: _p, ...base } = statuses[0] ?? { service: this.name(i) };
    return {
      ...base,
      ports: { ...(base.ports as object), ...this.ports(i) },
      in_flight: sum(statuses, 'in_flight'),
      open_responses: sum(statuses, 'open_responses'),
      cluster: { workers_configured: this.workersConfigured, workers_ready: statuses.length },
      workers: statuses.map((s) => ({
        worker_id: s.worker_id,
        pid: s.pid,
        config_hash: s.config_hash,
        loaded_at: s.loaded_at,
        in_flight: s.in_flight,
        open_responses: s.open_responses,
        last_reload: s.last_reload,
      })),
    };
  }

  private async health(
    i: number,
  ): Promise<{ ok: boolean; checks: Record<string, unknown>; workers: Array<Record<string, unknown>> }> {
    const answers = await this.supervisor.ask<{ ok: boolean; checks: Record<string, unknown> }>('health', i);
    const workers = answers.map(({ slot, result }) =>
      result.status === 'fulfilled'
        ? { worker_id: slot.worker?.id, ok: result.value.ok, checks: result.value.checks }
        : { worker_id: slot.worker?.id, ok: false, checks: {}, error: String((result.reason as Error).message) },
    );
    const allUp = workers.length === this.workersConfigured;
    return {
      ok: allUp && workers.every((w) => w.ok),
      checks: (workers.find((w) => !w.ok) ?? workers[0])?.checks ?? {},
      workers,
    };
  }
}

function sum(items: Array<Record<string, unknown>>, key: string): number {
  return items.reduce((n, s) => n + (typeof s[key] === 'number' ? (s[key] as number) : 0), 0);
}
