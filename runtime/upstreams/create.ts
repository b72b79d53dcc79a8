/**
 * Builds an upstream from one entry of a service's `upstreams:` map.
 */
import { isAbsolute, resolve } from 'node:path';
import type { Logger } from 'pino';
import { httpDefaults, stdioDefaults, type UpstreamConfig } from './config.ts';
import { HttpUpstreamImpl } from './http.ts';
import { JsonRpcHttpUpstream } from './jsonrpc-http.ts';
import { StdioUpstream } from './stdio.ts';
import { traced } from './traced.ts';
import type { Upstream } from './types.ts';

export type { UpstreamConfig } from './config.ts';
export { upstreamConfigSchema } from './config.ts';

export interface UpstreamDeps {
  logger: Logger;
  /** Directory of the service's config file; a relative stdio `cwd` resolves against it. */
  configDir: string;
}

export function createUpstream(name: string, config: UpstreamConfig, deps: UpstreamDeps): Upstream {
  return traced(buildUpstream(name, config, deps));
}

function buildUpstream(name: string, config: UpstreamConfig, deps: UpstreamDeps): Upstream {
  switch (config.kind) {
    case 'stdio': {
      const resolved = stdioDefaults(config);
      if (resolved.cwd && !isAbsolute(resolved.cwd)) resolved.cwd = resolve(deps.configDir, resolved.cwd);
      return new StdioUpstream(name, resolved, deps.logger);
    }
    case 'jsonrpc':
      return new JsonRpcHttpUpstream(name, httpDefaults(config), deps.logger);
    case 'http':
    case 'openai':
      return new HttpUpstreamImpl(name, httpDefaults(config), deps.logger);
    default:
      throw new Error(`upstream "${name}": unknown kind "${(config as { kind?: string }).kind}"`);
  }
}
