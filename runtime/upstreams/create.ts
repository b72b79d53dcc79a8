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
import { BalancedJsonRpcUpstream } from './jsonrpc-balanced.ts';
import { JsonRpcHttpUpstream } from './jsonrpc-http.ts';
import { asProvider } from './provider.ts';
import { type SlotBounds, slotted } from './slots.ts';
import { StdioUpstream } from './stdio.ts';
import { traced } from './traced.ts';
import { isHttpUpstream, type Upstream } from './types.ts';

export type { UpstreamConfig } from './config.ts';
export { upstreamConfigSchema } from './config.ts';

export interface UpstreamDeps {
  logger: Logger;
  /** Directory of the service's config file; a relative stdio `cwd` resolves against it. */
  configDir: string;
  /** The service's metrics (a stdio upstream counts its client sessions). */
  metrics?: MetricsKit;
  /**
   * The gateway's environment (default: the process's): where an `openai` upstream's `api_key_env`
   * is read, what a `stdio` child's environment is drawn from (child-env.ts), and the session tag
   * secret of a balanced `jsonrpc` upstream (session-tags.ts).
   */
  environment?: NodeJS.ProcessEnv;
}

export function createUpstream(name: string, config: UpstreamConfig, deps: UpstreamDeps): Upstream {
  // The circuit breakers outside the tracing: a refused (or waiting) call opens no client span.
  const maxRequests = (config as { max_requests?: number }).max_requests;
  const mcp = (config as { protocol?: string }).protocol === 'mcp';
  const built = buildUpstream(name, config, deps);
  const provider = config.kind === 'openai' ? asProvider(built, config, deps.environment ?? process.env) : built;
  let upstream = traced(provider, { mcp });
  const bounds = slotBounds(config);
  if (bounds && isHttpUpstream(upstream)) upstream = slotted(upstream, bounds, deps.metrics);
  return limited(upstream, maxRequests, deps.metrics);
}

/** `max_active` / `max_pending` of an http / openai upstream (max_pending alone: the pools' connections are the slots). */
function slotBounds(config: UpstreamConfig): SlotBounds | undefined {
  if (config.kind !== 'http' && config.kind !== 'openai') return undefined;
  const { max_active, max_pending } = config;
  if (max_active === undefined && max_pending === undefined) return undefined;
  const resolved = httpDefaults({ ...config, url: '' });
  return {
    maxActive: max_active ?? resolved.connections * (config.endpoints?.length ?? 1),
    maxPending: max_pending ?? Number.POSITIVE_INFINITY,
    timeoutMs: resolved.timeout_ms,
  };
}

function buildUpstream(name: string, config: UpstreamConfig, deps: UpstreamDeps): Upstream {
  switch (config.kind) {
    case 'stdio': {
      const resolved = stdioDefaults(config, deps.environment ?? process.env);
      if (resolved.cwd && !isAbsolute(resolved.cwd)) resolved.cwd = resolve(deps.configDir, resolved.cwd);
      return new StdioUpstream(name, resolved, deps.logger, deps.metrics);
    }
    case 'jsonrpc':
      if (config.endpoints) {
        return new BalancedJsonRpcUpstream(
          name,
          { ...config, endpoints: config.endpoints },
          deps.logger,
          deps.metrics,
          deps.environment,
        );
      }
      return new JsonRpcHttpUpstream(name, httpDefaults(withUrl(name, config)), deps.logger);
    case 'http':
    case 'openai': {
      // A single URL with retries is one endpoint of the balancer (its retry loop); without, the bare pool.
      const endpoints = config.endpoints ?? (config.retry && config.url ? [{ url: config.url }] : undefined);
      if (endpoints) {
        const { url: _, ...rest } = config;
        return new BalancedHttpUpstream(name, { ...rest, endpoints }, deps.logger, deps.metrics);
      }
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
