/**
 * A service run the way it is deployed: `switchyard serve <config>` in its own process, on free
 * ports, so that a test's client and the service do not share an event loop (and a signal reaches
 * a real process).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { freePort, until } from './servers.ts';

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
  const port = await freePort();
  const metricsPort = await freePort();
  const set = [`listen.port=${port}`, `metrics.port=${metricsPort}`, 'admin.port=0', ...(options.set ?? [])];
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
  const url = `http://127.0.0.1:${port}`;
  let banner = '';
  child.stderr?.on('data', (d: Buffer) => {
    banner += d.toString();
  });
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`service exited (${child.exitCode}): ${err}${out.slice(-2000)}`);
    // A cluster says so once every worker is ready ("(2 workers)").
    if (options.workers !== undefined && !banner.includes(`(${options.workers} workers)`)) return false;
    return fetch(url).then(
      () => true,
      () => false,
    );
  }, 240_000); // a cold start of several services takes 20-60 s on a loaded 2-core machine, over 90 s with busy loops on both cores (issue 32)
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
