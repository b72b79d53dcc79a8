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
    upstream<T extends Upstream>(name: string): T {
      const u = options.upstreams?.[name];
      if (!u) throw new Error(`unknown upstream "${name}"`);
      return u as T;
    },
    resolvePath: (p) => (isAbsolute(p) ? p : resolve(configDir, p)),
    stageId: 'test-stage',
  };
}
