/**
 * Whether a service is exposed: a listener bound beyond loopback. An exposed service refuses to
 * start while a development credential (`${VAR:~default}`, see interpolate.ts) is in effect.
 */
import type { DevelopmentDefault } from './interpolate.ts';
import type { ConfigPath } from './source.ts';

/** Loopback addresses and names; anything else (0.0.0.0, ::, a LAN address, a name) is exposed. */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}

interface Listeners {
  listen?: { host?: string };
  metrics?: { host?: string; enabled?: boolean };
  admin?: { host?: string };
}

/** The listeners (`listen`, `metrics`, `admin`) bound beyond loopback, with their hosts. */
export function exposedListeners(config: Listeners): Array<{ listener: string; host: string }> {
  const out: Array<{ listener: string; host: string }> = [];
  for (const name of ['listen', 'metrics', 'admin'] as const) {
    const l = config[name];
    if (!l) continue;
    if (name === 'metrics' && (l as { enabled?: boolean }).enabled === false) continue;
    const host = l.host ?? '127.0.0.1';
    if (!isLoopbackHost(host)) out.push({ listener: name, host });
  }
  return out;
}

/**
 * One problem per development default in effect on a service that is exposed, or that turns on
 * client authentication (`auth.enabled`: an operator who secures the API means the admin routes
 * too), naming the variable to set.
 */
export function developmentCredentialProblems(
  config: Listeners & { auth?: { enabled?: unknown } },
  defaults: DevelopmentDefault[],
): Array<{ path: ConfigPath; message: string }> {
  const exposed = exposedListeners(config);
  const authOn = config.auth?.enabled === true || config.auth?.enabled === 'true';
  if (exposed.length === 0 && !authOn) return [];
  const why =
    exposed.length > 0
      ? `${exposed.map((e) => `${e.listener}.host ${e.host}`).join(', ')} binds beyond loopback`
      : 'client authentication is on (auth.enabled)';
  // One problem per variable, at its first use (a YAML alias repeats the value elsewhere).
  const first = new Map<string, DevelopmentDefault>();
  for (const d of defaults) if (!first.has(d.variable)) first.set(d.variable, d);
  return [...first.values()].map((d) => ({
    path: d.path,
    message: `${d.variable} is not set: its development default is for an unauthenticated service on loopback only, and ${why}; set ${d.variable}`,
  }));
}
