/**
 * A cluster (`serve --workers 2`, a real process group) stopped under reconnecting load loses no
 * request (issue 29: "the cluster's 1–6 resets on SIGTERM"): clients keep sending, each on a
 * keep-alive connection it reopens as soon as an answer says `Connection: close`, and others on
 * a fresh connection per request, when SIGTERM comes
 *
 * - to one worker (it drains, is replaced, the cluster goes on),
 * - to the primary alone (it stops accepting and stops its workers),
 * - to the whole process group (systemd, Ctrl-C).
 *
 * Every request that went out is answered; a client that comes after the listener closed meets a
 * refused connection (ECONNREFUSED, nothing sent), never a reset. Outcomes are counted, not timed.
 */
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NotSent, RawConnection } from '../helpers/raw-http.ts';
import { until } from '../helpers/servers.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';
import { writeServiceFile } from '../helpers/services.ts';

const probes = join(import.meta.dirname, 'fixtures/runtime-probes.ts');
const file = writeServiceFile(`service: cluster-stop
listen: { port: 0 }
metrics: { port: 0 }
admin: { port: 0 }
plugins: [${JSON.stringify(probes)}]
limits: { drain_timeout_ms: 5000 }
routes:
  - match: { path: /who }
    pipeline: [{ whoami: { label: stop } }]
`);

/** What became of the requests sent: answered (by status), or failed after being sent (by error). */
interface Outcomes {
  answered: number;
  failed: string[];
  /** Connections refused before anything was sent (the listener closed): not a failure. */
  refused: number;
  /**
   * Keep-alive connections the service closed while idle, before the client wrote its next request
   * (a stopping worker closes them after a short linger): nothing was sent, the client reconnects.
   */
  closedIdle: number;
}

/**
 * Runs `keepAlive` clients that reopen their connection whenever told to close it, and `fresh`
 * clients with one connection per request, until `done()` says stop or the port refuses them.
 */
function load(port: number, keepAlive: number, fresh: number, done: () => boolean): Promise<Outcomes> {
  const outcomes: Outcomes = { answered: 0, failed: [], refused: 0, closedIdle: 0 };
  const open = () =>
    RawConnection.open(port).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED') outcomes.refused++;
      else outcomes.failed.push(`connect: ${err.code ?? err.message}`);
      return undefined;
    });
  const keepAliveClient = async () => {
    let conn = await open();
    let used = 0;
    while (conn && !done()) {
      try {
        const answer = await conn.post('/who', {});
        used++;
        outcomes.answered++;
        if (answer.headers.connection === 'close') {
          conn.close();
          conn = await open();
          used = 0;
        }
      } catch (err) {
        if (err instanceof NotSent) outcomes.closedIdle++;
        else outcomes.failed.push(`keep-alive (${used} answered on it before): ${(err as Error).message}`);
        used = 0;
        conn?.close();
        conn = await open();
      }
    }
    conn?.close();
  };
  const freshClient = async () => {
    while (!done()) {
      const outcome = await new Promise<string>((resolve) => {
        let connected = false;
        // A failure says how far the request got, and when (ms from the signal): where a reset comes from.
        const failed = (err: NodeJS.ErrnoException, stage: string) =>
          resolve(
            err.code === 'ECONNREFUSED'
              ? err.code
              : `${err.code ?? err.message} (${stage}, ${connected ? 'connected' : 'not connected'}, ${Date.now() - signalledAt} ms after the signal)`,
          );
        const req = request(
          { host: '127.0.0.1', port, path: '/who', agent: false, headers: { connection: 'close' } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(String(res.statusCode)));
            res.on('error', (err: NodeJS.ErrnoException) => failed(err, 'answer started'));
          },
        );
        req.on('socket', (socket) => socket.once('connect', () => (connected = true)));
        req.on('error', (err: NodeJS.ErrnoException) => failed(err, 'no answer'));
        req.end();
      });
      if (outcome === '200') outcomes.answered++;
      else if (outcome === 'ECONNREFUSED') {
        outcomes.refused++;
        return;
      } else outcomes.failed.push(`fresh: ${outcome}`);
    }
  };
  return Promise.all([
    ...Array.from({ length: keepAlive }, keepAliveClient),
    ...Array.from({ length: fresh }, freshClient),
  ]).then(() => outcomes);
}

async function workerPids(svc: ServiceProcess): Promise<number[]> {
  const seen = new Set<number>();
  for (let i = 0; i < 20 && seen.size < 2; i++) {
    const res = await fetch(`${svc.url}/who`, { headers: { connection: 'close' } });
    seen.add(((await res.json()) as { pid: number }).pid);
  }
  return [...seen];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** When the test last sent a signal (Date.now()). */
let signalledAt = 0;
/**
 * How the primary closed its listening sockets (its `listening sockets closed` log lines: 'plug
 * accepted' unless its plug failed or waited too long), and the connections it accepted and
 * closed instead of handing on (`cluster stopped`: none in a clean stop).
 */
function closedHowOf(svc: { stdout(): string }): string[] {
  return svc
    .stdout()
    .split('\n')
    .filter((line) => line.includes('listening sockets closed') || line.includes('cluster stopped'))
    .map((line) => {
      const entry = JSON.parse(line) as { listeners?: unknown; plug_window_ms?: unknown; dropped?: unknown };
      return JSON.stringify(
        entry.listeners ? { closed: entry.listeners, plugWindowMs: entry.plug_window_ms } : { dropped: entry.dropped },
      );
    });
}

function signal(pid: number, name: NodeJS.Signals): void {
  signalledAt = Date.now();
  process.kill(pid, name);
}

describe('cluster stop under reconnecting load', () => {
  const started: ServiceProcess[] = [];
  afterAll(async () => {
    for (const svc of started) await svc.stop('SIGKILL');
  });

  it('SIGTERM to one worker: it is replaced, no request lost; then SIGTERM to the primary alone: none lost, exit 0', async () => {
    const svc = await spawnService(file, { workers: 2 });
    started.push(svc);
    const pids = await workerPids(svc);
    expect(pids).toHaveLength(2);

    let stopWorkerLoad = false;
    const workerLoad = load(svc.port, 32, 64, () => stopWorkerLoad);
    await sleep(300);
    signal(pids[0] as number, 'SIGTERM');
    await until(async () => {
      const now = await workerPids(svc);
      return now.length === 2 && !now.includes(pids[0] as number);
    }, 30_000);
    await sleep(300);
    stopWorkerLoad = true;
    const afterWorker = await workerLoad;
    console.info(`SIGTERM to a worker: ${JSON.stringify(afterWorker)}`);
    expect(afterWorker.failed).toEqual([]);
    expect(afterWorker.refused).toBe(0);
    expect(afterWorker.answered).toBeGreaterThan(20);

    let stopped = false;
    const primaryLoad = load(svc.port, 32, 64, () => stopped);
    await sleep(300);
    // The primary alone (not its group): it relays the stop to its workers.
    signal(svc.child.pid as number, 'SIGTERM');
    const [code] = await Promise.all([
      new Promise<number | null>((resolve) => svc.child.once('exit', (c) => resolve(c))),
      until(() => svc.child.exitCode !== null, 30_000).then(() => {
        stopped = true;
      }),
    ]);
    const afterPrimary = await primaryLoad;
    // How the primary closed its listening socket ('plug accepted' unless its plug failed or waited too long).
    const closedHow = closedHowOf(svc);
    console.info(`SIGTERM to the primary: ${JSON.stringify({ ...afterPrimary, closedHow })}`);
    expect(code).toBe(0);
    expect(afterPrimary.failed, `listening socket closed: ${closedHow}`).toEqual([]);
    expect(afterPrimary.answered).toBeGreaterThan(20);
  }, 180_000); // a worker is forked and started meanwhile: 30-60 s on a loaded 2-core machine

  it('SIGTERM to the process group: no request lost, exit 0', async () => {
    const svc = await spawnService(file, { workers: 2 });
    started.push(svc);
    let stopped = false;
    const groupLoad = load(svc.port, 32, 64, () => stopped);
    await sleep(300);
    signalledAt = Date.now();
    const code = await svc.stop('SIGTERM');
    stopped = true;
    const outcomes = await groupLoad;
    const closedHow = closedHowOf(svc);
    console.info(`SIGTERM to the group: ${JSON.stringify({ ...outcomes, closedHow })}`);
    expect(code).toBe(0);
    expect(outcomes.failed, `listening socket closed: ${closedHow}`).toEqual([]);
    expect(outcomes.answered).toBeGreaterThan(20);
  }, 90_000);
});
