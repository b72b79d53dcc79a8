/**
 * Helpers for plugin tests: a real PluginEnv without a running service.
 * (Integration tests start real services from config files instead: see test/helpers.)
 */
import { tmpdir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import type { Logger } from 'pino';
import { silentLogger } from './observability/logger.ts';
import { createMetricsKit } from './observability/metrics.ts';
import type { PluginEnv } from './plugin.ts';
import type { Upstream } from './upstreams/types.ts';

export interface TestEnvOptions {
  resources?: Record<string, unknown>;
  upstreams?: Record<string, Upstream>;
  configDir?: string;
  logger?: Logger;
  serviceName?: string;
}

export function createTestEnv(options: TestEnvOptions = {}): PluginEnv {
  const configDir = options.configDir ?? tmpdir();
  return {
    service: {
      name: options.serviceName ?? 'test',
      version: '0.0.0-test',
      configDir,
      ports: {},
      startedAt: new Date(),
    },
    logger: options.logger ?? silentLogger,
    metrics: createMetricsKit(),
    resource<T>(name: string): T {
      if (!options.resources || !(name in options.resources)) throw new Error(`unknown resource "${name}"`);
      return options.resources[name] as T;
    },
    async resourceHealth(name: string) {
      if (!options.resources || !(name in options.resources)) throw new Error(`unknown resource "${name}"`);
      return undefined;
    },
    upstream<T extends Upstream>(name: string): T {
      const u = options.upstreams?.[name];
      if (!u) throw new Error(`unknown upstream "${name}"`);
      return u as T;
    },
    resolvePath: (p) => (isAbsolute(p) ? p : resolve(configDir, p)),
    introspect: () => ({
      routes: [],
      resources: Object.keys(options.resources ?? {}),
      upstreams: Object.keys(options.upstreams ?? {}),
    }),
    stageId: 'test-stage',
  };
}

export interface StartedService {
  runtime: import('./service/runtime.ts').ServiceRuntime;
  /** Base URL of the main listener, e.g. `http://127.0.0.1:41234`. */
  url: string;
  metricsUrl?: string;
  adminUrl?: string;
  close(): Promise<void>;
}

/**
 * Starts a real service from its config file on ephemeral ports (main, and metrics/admin when the
 * config has them), with a silent logger unless `logger` is given.
 */
export async function startService(
  file: string,
  options: { set?: string[]; env?: Record<string, string | undefined>; logger?: Logger; warmupMs?: number } = {},
): Promise<StartedService> {
  const { readConfigSource } = await import('./config/source.ts');
  const { ServiceRuntime } = await import('./service/runtime.ts');
  const raw = readConfigSource(resolve(file)).value as Record<string, unknown>;
  const set = ['listen.port=0', ...(options.set ?? [])];
  if (raw.metrics) set.push('metrics.port=0');
  if (raw.admin) set.push('admin.port=0');
  const runtime = await ServiceRuntime.start(file, {
    set,
    env: options.env,
    logger: options.logger ?? silentLogger,
    warmupMs: options.warmupMs,
  });
  const base = (port?: number) => (port === undefined ? undefined : `http://127.0.0.1:${port}`);
  return {
    runtime,
    url: base(runtime.info.ports.main) as string,
    metricsUrl: base(runtime.info.ports.metrics),
    adminUrl: base(runtime.info.ports.admin),
    close: () => runtime.close(),
  };
}
