/**
 * The deployment files (deploy/) as tests read them, and the container entrypoint run as the
 * image runs it: `sh deploy/docker/entrypoint.sh` with the manifest's environment, on ports it binds itself (0).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { untilReady } from './service-process.ts';

export const root = join(import.meta.dirname, '../..');
export const deployDir = join(root, 'deploy');

export function readDeploy(path: string): string {
  return readFileSync(join(deployDir, path), 'utf8');
}

/** A YAML file of deploy/ (every document of it). */
export function yamlDocs(path: string): Record<string, unknown>[] {
  return parseAllDocuments(readDeploy(path), { merge: true }).map((d) => d.toJS() as Record<string, unknown>);
}

export function yamlDoc<T = Record<string, unknown>>(path: string): T {
  return parse(readDeploy(path), { merge: true }) as T;
}

/**
 * Metric names a PromQL expression uses: identifiers with the prefixes our services export
 * (`switchyard_`, `db_`, `process_`, `nodejs_`), plus Prometheus' own `up`.
 */
export function metricNames(expr: string): string[] {
  const names = expr.match(/\b(?:switchyard|db|process|nodejs)_[a-z0-9_]+\b|\bup(?=\{)/g) ?? [];
  return [...new Set(names)];
}

/** Metric names in a Prometheus exposition: every TYPE line, with a histogram's series names. */
export function exportedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
  }
  return names;
}

/** What the entrypoint would run for `env` and `args` (SWITCHYARD_DRY_RUN), one argument a line. */
export function entrypointCommand(env: Record<string, string>, args: string[] = []): string[] {
  const res = spawnSync('sh', [join(deployDir, 'docker/entrypoint.sh'), ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env, SWITCHYARD_DRY_RUN: '1' },
    encoding: 'utf8',
  });
  if (res.status !== 0) throw new Error(`entrypoint failed (${res.status}): ${res.stderr}`);
  return res.stdout.replace(/\n$/, '').split('\n');
}

export interface Replica {
  child: ChildProcess;
  url: string;
  metricsUrl: string;
  output(): string;
  stop(): Promise<void>;
}

/** Runs the entrypoint for real (it execs node) with `env` on free ports; resolves when /health answers. */
export async function startEntrypoint(env: Record<string, string>): Promise<Replica> {
  const child = spawn('sh', [join(deployDir, 'docker/entrypoint.sh')], {
    cwd: root,
    env: {
      ...process.env,
      LOG_FORMAT: 'json',
      ...env,
      // Port 0, read from the ready banner (service-process.ts `untilReady`: why not a free port).
      PROXY_PORT: '0',
      METRICS_PORT: '0',
      PROXY_ADMIN_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out = (out + d.toString()).slice(-20000);
  });
  child.stderr?.on('data', (d: Buffer) => {
    out = (out + d.toString()).slice(-20000);
  });
  const { url, metricsPort } = await untilReady(child, {
    probe: (ready) =>
      fetch(`${ready}/health`).then(
        (r) => r.ok,
        () => false,
      ),
    timeoutMs: 120_000, // waiting only: a cold start on a loaded 2-core machine took over 45 s
    exited: () => `entrypoint exited (${child.exitCode}): ${out.slice(-3000)}`,
  });
  return {
    child,
    url,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    output: () => out,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
