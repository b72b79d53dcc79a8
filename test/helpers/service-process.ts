/**
 * A service run the way it is deployed: `switchyard serve <config>` in its own process, on free
 * ports, so that a test's client and the service do not share an event loop (and a signal reaches
 * a real process).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { until } from './servers.ts';

const root = join(import.meta.dirname, '../..');

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  port: number;
  /** The metrics listener's /metrics (the config's path), when the config has one. */
  metricsUrl: string;
  /** What the service wrote on stdout (its JSON log lines), kept whole. */
  stdout(): string;
  /**
   * Sends SIGTERM (to the whole process group for a cluster, as systemd or Ctrl-C do) and resolves
   * with the exit code once the process ended.
   */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function spawnService(
  config: string,
  options: {
    env?: Record<string, string>;
    set?: string[];
    /** `serve --workers N`: a cluster, the primary and its workers in a process group of their own. */
    workers?: number;
  } = {},
): Promise<ServiceProcess> {
  // Port 0, the port read from the ready banner (untilReady says why).
  const set = ['listen.port=0', 'metrics.port=0', 'admin.port=0', ...(options.set ?? [])];
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin/switchyard.js'),
      'serve',
      ...(options.workers ? ['--workers', String(options.workers)] : []),
      config,
      ...set.flatMap((s) => ['--set', s]),
    ],
    {
      cwd: root,
      env: { ...process.env, LOG_FORMAT: 'json', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.workers !== undefined,
    },
  );
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-4000);
  });
  const { url, port, metricsPort } = await untilReady(child, {
    workers: options.workers,
    probe: (ready) =>
      fetch(ready).then(
        () => true,
        () => false,
      ),
    // A cold start of several services takes 20-60 s on a loaded 2-core machine, over 90 s with
    // busy loops on both cores (issue 32).
    timeoutMs: 240_000,
    exited: () => `service exited (${child.exitCode}): ${err}${out.slice(-2000)}`,
  });
  return {
    child,
    url,
    port,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    stdout: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      if (options.workers !== undefined && child.pid !== undefined) process.kill(-child.pid, signal);
      else child.kill(signal);
      const [code] = await once(child, 'exit');
      return code as number | null;
    },
  };
}

/**
 * Waits for a spawned `switchyard serve` (`child`, just spawned: its stderr is read from now) to
 * write its ready banner line and for `probe` of that line's URL to succeed; throws `exited()`
 * if the process ends first. The service should listen on port 0: a port picked free first and
 * bound seconds later can be taken in between by another test file's server, which then answers
 * the probe for a service that failed to bind (issue 32).
 */
export async function untilReady(
  child: ChildProcess,
  o: { workers?: number; probe: (url: string) => Promise<boolean>; timeoutMs: number; exited: () => string },
): Promise<ReadyLine> {
  let banner = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (banner.length < 20000) banner += d.toString();
  });
  let ready: ReadyLine | undefined;
  await until(async () => {
    if (child.exitCode !== null) throw new Error(o.exited());
    // Written once the service listens (a cluster's once every worker is ready).
    ready ??= readyLine(banner, o.workers);
    return ready !== undefined && o.probe(ready.url);
  }, o.timeoutMs);
  return ready as ReadyLine;
}

export interface ReadyLine {
  url: string;
  port: number;
  metricsPort: number | undefined;
}

/**
 * The ready banner's line of the (first) service, as `switchyard serve` writes it on stderr:
 * `<name>: http://127.0.0.1:<port>  metrics :<port>  admin :<port>  ok` (a cluster: `(N workers)`).
 */
export function readyLine(banner: string, workers?: number): ReadyLine | undefined {
  // Whole lines only: a chunk of stderr may end inside one.
  for (const line of banner.split('\n').slice(0, -1)) {
    const m = /^\S+: (https?:\/\/[^\s/]+:(\d+))(?: {2}metrics :(\d+))?(?: {2}admin :\d+)? {2}(.*)$/.exec(line);
    if (m === null) continue;
    if (workers !== undefined && m[4] !== `(${workers} workers)`) continue;
    return { url: m[1], port: Number(m[2]), metricsPort: m[3] === undefined ? undefined : Number(m[3]) };
  }
  return undefined;
}
