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
  // Port 0, the port read from the ready banner: a port picked here and bound by the service
  // seconds later can be taken in between by another test file's server, which then answered the
  // readiness probe for a service that had failed to bind (ECONNREFUSED later, issue 32).
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
  let banner = '';
  child.stderr?.on('data', (d: Buffer) => {
    banner += d.toString();
  });
  let ready: ReadyLine | undefined;
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`service exited (${child.exitCode}): ${err}${out.slice(-2000)}`);
    // The banner's line: written once the service listens (a cluster's once every worker is ready).
    ready ??= readyLine(banner, options.workers);
    if (ready === undefined) return false;
    return fetch(ready.url).then(
      () => true,
      () => false,
    );
  }, 240_000); // a cold start of several services takes 20-60 s on a loaded 2-core machine, over 90 s with busy loops on both cores (issue 32)
  const { url, port, metricsPort } = ready as ReadyLine;
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
