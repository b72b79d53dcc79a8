/**
 * Builds an upstream from one entry of a service's `upstreams:` map.
 */
import { isAbsolute, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { MetricsKit } from '../observability/metrics.ts';
import { BalancedHttpUpstream } from './balanced.ts';
import { limited } from './circuit.ts';
import { httpDefaults, stdioDefaults, type UpstreamConfig } from './config.ts';
import { HttpUpstreamImpl } from './http.ts';
import { JsonRpcHttpUpstream } from './jsonrpc-http.ts';
import { asProvider } from './provider.ts';
import { StdioUpstream } from './stdio.ts';
import { traced } from './traced.ts';
import type { Upstream } from './types.ts';

export type { UpstreamConfig } from './config.ts';
export { upstreamConfigSchema } from './config.ts';

export interface UpstreamDeps {
  logger: Logger;
  /** Directory of the service's config file; a relative stdio `cwd` resolves against it. */
  configDir: string;
  /** The service's metrics (a stdio upstream counts its client sessions). */
  metrics?: MetricsKit;
  /** Where an `openai` upstream's `api_key_env` is read (default: the process environment). */
  environment?: NodeJS.ProcessEnv;
}

export function createUpstream(name: string, config: UpstreamConfig, deps: UpstreamDeps): Upstream {
  // The circuit breaker outside the tracing: a refused call opens no client span.
  const maxRequests = (config as { max_requests?: number }).max_requests;
  const built = buildUpstream(name, config, deps);
  const provider = config.kind === 'openai' ? asProvider(built, config, deps.environment ?? process.env) : built;
  return limited(traced(provider), maxRequests, deps.metrics);
}

function buildUpstream(name: string, config: UpstreamConfig, deps: UpstreamDeps): Upstream {
  switch (config.kind) {
    case 'stdio': {
      const resolved = stdioDefaults(config);
      if (resolved.cwd && !isAbsolute(resolved.cwd)) resolved.cwd = resolve(deps.configDir, resolved.cwd);
      return new StdioUpstream(name, resolved, deps.logger, deps.metrics);
    }
    case 'jsonrpc':
      return new JsonRpcHttpUpstream(name, httpDefaults(withUrl(name, config)), deps.logger);
    case 'http':
    case 'openai': {
      const endpoints = config.endpoints;
      if (endpoints) return new BalancedHttpUpstream(name, { ...config, endpoints }, deps.logger, deps.metrics);
      return new HttpUpstreamImpl(name, httpDefaults(withUrl(name, config)), deps.logger);
    }
    default:
      throw new Error(`upstream "${name}": unknown kind "${(config as { kind?: string }).kind}"`);
  }
}

function withUrl<C extends { url?: string }>(name: string, config: C): C & { url: string } {
  if (config.url === undefined) throw new Error(`upstream "${name}": url or endpoints is required`);
  return config as C & { url: string };
}
