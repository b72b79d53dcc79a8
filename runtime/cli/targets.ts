/**
 * What a CLI command talks to: a URL, a config file, or the name of a running service. A name is
 * looked up in the run registry (run-registry.ts) that `switchyard serve` writes; a config file
 * gives its listeners' addresses (the registry's real ports first, for a service started with port
 * 0) and the admin token the config sets, so `switchyard reload configs/ranking.yaml` needs
 * nothing else.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ServiceConfig } from '../config/types.ts';
import { localUrl } from '../server/listener.ts';
import { findRun, listRuns, type RunEntry } from './run-registry.ts';

export interface Target {
  /** Base URL of the listener the command needs. */
  base: string;
  /** A token found in the config file, when the command line gives none. */
  token?: string;
}

/** `admin`: the admin listener (config, reload, health); `ops`: the main listener's ops-api. */
export type Listener = 'admin' | 'ops';

type Env = Record<string, string | undefined>;

/** The target, or what is wrong with the argument. */
export async function resolveTarget(arg: string, listener: Listener, env: Env): Promise<Target | string> {
  if (/^https?:\/\//i.test(arg)) return { base: arg.replace(/\/+$/, '') };
  if (/\.(ya?ml|toml|json)$/i.test(arg) || existsSync(arg)) return fromConfig(arg, listener, env);
  const run = findRun(arg, env);
  if (!run) {
    const running = listRuns(env).map((r) => r.service);
    return (
      `no running service named "${arg}"` +
      (running.length > 0 ? ` (running: ${running.join(', ')})` : ' (none is recorded as running)') +
      '; give its URL or its config file'
    );
  }
  return fromRun(run, listener);
}

function fromRun(run: RunEntry, listener: Listener): Target | string {
  if (listener === 'ops') return { base: run.url };
  return run.admin ? { base: run.admin } : `service "${run.service}" has no admin listener (config key admin)`;
}

async function fromConfig(file: string, listener: Listener, env: Env): Promise<Target | string> {
  if (!existsSync(file)) return `no such config file: ${file}`;
  // The service started from this file, if it runs: its real ports (port 0 in the file), and
  // still reachable when the file has just been broken (what `reload` then reports).
  const run = listRuns(env).find((r) => r.config === resolve(file));
  // Loaded lazily: a URL or a name needs no config machinery.
  const { loadService } = await import('../config/load.ts');
  let config: ServiceConfig | undefined;
  let problem = '';
  try {
    config = (await loadService(file, { env })).config;
  } catch (err) {
    problem = `cannot read ${file}: ${(err as Error).message.split('\n')[0]}`;
  }
  if (listener === 'ops') {
    if (run) return { base: run.url, token: config && opsToken(config) };
    if (!config) return problem;
    return { base: localUrl(config.listen.host, config.listen.port, !!config.listen.tls), token: opsToken(config) };
  }
  const token = config?.admin?.token || undefined;
  if (run) return run.admin ? { base: run.admin, token } : `${file}: the running service has no admin listener`;
  if (!config) return problem;
  if (!config.admin) return `${file} has no admin listener (config key admin)`;
  return { base: localUrl(config.admin.host, config.admin.port), token };
}

/** The token of the config's ops-api stage, if it has one. */
function opsToken(config: ServiceConfig): string | undefined {
  for (const route of config.routes) {
    for (const stage of route.pipeline) {
      const token = stage.plugin === 'ops-api' ? stage.options.token : undefined;
      if (typeof token === 'string' && token !== '') return token;
    }
  }
  return undefined;
}
