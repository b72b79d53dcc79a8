/**
 * DNS rebinding and cross-site protection for every request of the main and admin listeners.
 *
 * Host: a browser fooled by DNS rebinding sends the attacker's name as Host, so a Host is
 * accepted when it is a loopback name, an IP address (no DNS involved) or a name listed in
 * `hosts.allow` ("*": any). Origin, when present: accepted when it is the request's own origin
 * (same Host), a page on a loopback name, or listed in `hosts.origins` ("*": any); `null` (a
 * sandboxed or file page) is refused. Anything else is 403 `forbidden` in the service's dialect.
 */
import { isIP } from 'node:net';
import { GatewayError } from '../errors.ts';

export interface HostPolicy {
  allow: string[];
  origins: string[];
}

interface Compiled {
  anyHost: boolean;
  hosts: Set<string>;
  anyOrigin: boolean;
  origins: Set<string>;
}

const compiledPolicies = new WeakMap<HostPolicy, Compiled>();

function compile(policy: HostPolicy): Compiled {
  let c = compiledPolicies.get(policy);
  if (!c) {
    c = {
      anyHost: policy.allow.includes('*'),
      hosts: new Set(policy.allow.map((h) => h.toLowerCase())),
      anyOrigin: policy.origins.includes('*'),
      origins: new Set(policy.origins.map((o) => o.toLowerCase().replace(/\/$/, ''))),
    };
    compiledPolicies.set(policy, c);
  }
  return c;
}

/** `name` of a `name[:port]` or `[v6][:port]` Host value, lower-cased; undefined when malformed. */
export function hostName(host: string): string | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::\d{1,5})?$/i.exec(host.trim());
  return m ? (m[1] as string).toLowerCase() : undefined;
}

function isLoopbackName(name: string): boolean {
  return name === 'localhost' || name === '[::1]' || /^127(\.\d{1,3}){3}$/.test(name);
}

function isAddress(name: string): boolean {
  return isIP(name.startsWith('[') ? name.slice(1, -1) : name) !== 0;
}

/**
 * Throws 403 `forbidden` when the request's Host or Origin is not accepted by `policy`
 * (`onRefused` is told which, for the metrics).
 */
export function checkHostAndOrigin(
  headers: { host?: string; origin?: string | string[] },
  policy: HostPolicy = { allow: [], origins: [] },
  onRefused?: (header: 'host' | 'origin') => void,
): void {
  const c = compile(policy);
  const host = headers.host;
  // A browser always sends Host; a request without one cannot come from a rebinding page.
  if (host !== undefined && !c.anyHost) {
    const name = hostName(host);
    if (name === undefined || !(isLoopbackName(name) || isAddress(name) || c.hosts.has(name))) {
      onRefused?.('host');
      throw new GatewayError('forbidden', `Host ${JSON.stringify(host.slice(0, 100))} is not allowed (hosts.allow)`);
    }
  }
  const origin = headers.origin;
  if (origin === undefined || c.anyOrigin) return;
  const value = (Array.isArray(origin) ? origin.join(',') : origin).trim().toLowerCase();
  if (c.origins.has(value)) return;
  const m = /^https?:\/\/([^/]+)$/.exec(value);
  const originHost = m?.[1];
  const name = originHost === undefined ? undefined : hostName(originHost);
  if (name !== undefined && (isLoopbackName(name) || originHost === host?.trim().toLowerCase())) return;
  onRefused?.('origin');
  throw new GatewayError('forbidden', `Origin ${JSON.stringify(value.slice(0, 100))} is not allowed (hosts.origins)`);
}
