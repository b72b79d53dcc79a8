/**
 * The primary's workers: one slot per worker, forked at start and forked again after a backoff
 * when its worker dies (longer after a worker that died soon after starting); requests to every
 * ready worker; and the workers' stop (each drains as on SIGTERM, killed if it overstays).
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { ConnectionDispatch } from '../cluster-connections.ts';
import { workersTagSecret } from '../upstreams/session-tags.ts';
import { Calls, isMessage, type Message, mainPortsVariable, type Op, reply } from './ipc.ts';

/** A restarted worker that lived less than this counts as a failed start (longer backoff). */
const healthyRunMs = 10000;
const maxBackoffMs = 30000;

export interface Slot {
  index: number;
  worker?: Worker;
  /** Workers of this slot that died soon after starting, in a row. */
  failures: number;
  startedAt: number;
  restartTimer?: NodeJS.Timeout;
  ready: boolean;
  calls: Calls;
}

export interface SupervisorHooks {
  /** The main listeners' ports, in file order (a worker takes their connections from the primary). */
  mainPorts(): Array<number | undefined>;
  /** Per service: its main listener, which hands connections to the ready workers. */
  readonly dispatch: readonly ConnectionDispatch[];
  /** A worker died and is forked again (counted in the primary's metrics). */
  restarted(): void;
  /** A worker asked (the reload-api stage) to reload service `i` in every worker. */
  reloadEverywhere(i: number): Promise<unknown>;
}

export class WorkerSupervisor {
  private readonly slots: Slot[] = [];
  private stopping = false;

  constructor(
    private readonly hooks: SupervisorHooks,
    private readonly logger: Logger,
  ) {}

  /** Routes the workers' messages and exits from now on. */
  listen(): void {
    cluster.on('message', (worker, m: unknown) => this.onMessage(worker, m));
    cluster.on('exit', (worker, code, signal) => this.onExit(worker, code, signal));
  }

  /** Forks `workers` workers; resolves once each one serves every service. */
  async forkAll(workers: number): Promise<void> {
    cluster.setupPrimary({ serialization: 'advanced' });
    for (let index = 0; index < workers; index++) {
      this.slots.push({ index, failures: 0, startedAt: 0, ready: false, calls: new Calls() });
    }
    await Promise.all(this.slots.map((slot) => this.fork(slot)));
  }

  /** Forks the slot's worker; resolves when it serves, rejects if it fails to start. */
  private fork(slot: Slot): Promise<void> {
    const worker = cluster.fork({
      [mainPortsVariable]: JSON.stringify(this.hooks.mainPorts()),
      // Every worker tags MCP sessions alike (a session is served by any of them).
      ...workersTagSecret(),
    });
    slot.worker = worker;
    slot.ready = false;
    slot.startedAt = Date.now();
    // A message sent to a worker that just died (SIGKILL, the OOM killer) before its exit is seen
    // fails with EPIPE as an 'error' on the worker: unheard, it took the primary and the whole
    // cluster down (a status or metrics request asks every worker). Its exit is handled in onExit.
    worker.on('error', (err: Error) => {
      this.logger.warn({ worker_id: worker.id, err: err.message }, 'message to a worker failed');
    });
    return new Promise((resolve, reject) => {
      const onMessage = (m: unknown) => {
        if (!isMessage(m)) return;
        if (m.sy === 'ready') {
          slot.ready = true;
          for (const d of this.hooks.dispatch) d.add(worker);
          this.logger.info({ worker_id: worker.id, pid: worker.process.pid }, 'worker ready');
          done();
          resolve();
        } else if (m.sy === 'failed') {
          done();
          reject(new Error(`worker ${worker.id} failed to start: ${m.error}`));
        }
      };
      const onExit = (code: number | null) => {
        done();
        reject(new Error(`worker ${worker.id} exited while starting (code ${code})`));
      };
      const done = () => {
        worker.off('message', onMessage);
        worker.off('exit', onExit);
      };
      worker.on('message', onMessage);
      worker.once('exit', onExit);
    });
  }

  private slotOf(worker: Worker): Slot | undefined {
    return this.slots.find((s) => s.worker === worker);
  }

  private onMessage(worker: Worker, m: unknown): void {
    if (!isMessage(m)) return;
    const slot = this.slotOf(worker);
    if (!slot) return;
    if (m.sy === 'reply') slot.calls.settle(m);
    else if (m.sy === 'stop-accepting') this.hooks.dispatch[m.service]?.stopAccepting(worker);
    else if (m.sy === 'request' && m.op === 'reload-all') {
      // A reload asked from a worker (the reload-api stage): reload that service everywhere.
      void reply(
        (r) => {
          if (worker.isConnected()) worker.send(r);
        },
        m.id,
        () => this.hooks.reloadEverywhere(m.service),
      );
    }
  }

  private onExit(worker: Worker, code: number | null, signal: string | null): void {
    const slot = this.slotOf(worker);
    if (!slot) return;
    slot.calls.failAll(`worker ${worker.id} exited`);
    for (const d of this.hooks.dispatch) d.remove(worker);
    slot.worker = undefined;
    slot.ready = false;
    if (this.stopping) return;
    const lived = Date.now() - slot.startedAt;
    slot.failures = lived < healthyRunMs ? slot.failures + 1 : 0;
    const delay = Math.min(maxBackoffMs, 250 * 2 ** slot.failures);
    this.hooks.restarted();
    this.logger.error(
      { worker_id: worker.id, pid: worker.process.pid, code, signal, restart_in_ms: delay },
      'worker died; restarting it',
    );
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (this.stopping) return;
      this.fork(slot).catch((err: Error) => this.logger.error({ err: err.message }, 'worker restart failed'));
    }, delay);
  }

  private readyWorkers(): Slot[] {
    return this.slots.filter((s) => s.ready && s.worker?.isConnected());
  }

  /** Runs `op` for service `i` on every ready worker, in slot order. */
  async ask<T>(op: Op, i: number): Promise<Array<{ slot: Slot; result: PromiseSettledResult<T> }>> {
    const slots = this.readyWorkers();
    const results = await Promise.allSettled(
      slots.map((slot) => {
        const worker = slot.worker as Worker;
        return slot.calls.call((m) => worker.send(m), op, i) as Promise<T>;
      }),
    );
    return slots.map((slot, n) => ({ slot, result: results[n] as PromiseSettledResult<T> }));
  }

  /** From now on no worker is forked again (a stop is under way). */
  stopRestarting(): void {
    this.stopping = true;
    for (const slot of this.slots) clearTimeout(slot.restartTimer);
  }

  /**
   * Stops every worker: a ready one is told to drain (as on SIGTERM), one still starting gets
   * SIGTERM; one that does not stop within `drainMs` plus a margin is killed. Resolves once all exited.
   */
  async stopAll(drainMs: number): Promise<void> {
    const exits = this.slots.flatMap((slot) => {
      const worker = slot.worker;
      if (!worker || worker.isDead()) return [];
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      if (!slot.ready) {
        // Still starting: it does not listen for messages yet, and serves nothing to drain.
        worker.process.kill('SIGTERM');
      } else {
        try {
          worker.send({ sy: 'shutdown' } satisfies Message);
        } catch {
          worker.process.kill('SIGTERM');
        }
      }
      // A worker that does not stop in time (drain timeout plus a margin) is killed.
      const timer = setTimeout(() => worker.process.kill('SIGKILL'), drainMs + 10000);
      return [exited.finally(() => clearTimeout(timer))];
    });
    await Promise.all(exits);
  }
}
