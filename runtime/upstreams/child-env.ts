/**
 * The environment of a `stdio` upstream's child: never the gateway's own. The gateway's
 * environment holds its secrets (its tokens, the audit database URL with its password, the
 * providers' keys), and an MCP server hands its environment to anyone who asks it the right way
 * (the reference server has a `get-env` tool), so a child gets only:
 *
 * 1. what a process needs to run: the search path, the home directory, the user, the locale, the
 *    time zone, the temporary directory (and on Windows the system directories it cannot start
 *    without) — `baseVariables`, after the MCP SDK's own stdio client (a sudo-like list), plus the
 *    locale, time zone and temporary directory;
 * 2. the gateway's variables the upstream names in `inherit_env` (a name, or a prefix ending in
 *    `*`, e.g. `npm_config_*`);
 * 3. the upstream's `env` map, written in the config (it wins over both).
 */

/** Inherited by every child (a trailing `*` matches a prefix). */
export const baseVariables: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'TERM',
  'LANG',
  'LANGUAGE',
  'LC_*',
  'TZ',
  'TMPDIR',
];

/** Also inherited on Windows, where a process cannot start or find its own files without them. */
export const windowsVariables: readonly string[] = [
  'PATHEXT',
  'SYSTEMROOT',
  'SYSTEMDRIVE',
  'WINDIR',
  'COMSPEC',
  'TEMP',
  'TMP',
  'USERPROFILE',
  'USERNAME',
  'HOMEDRIVE',
  'HOMEPATH',
  'APPDATA',
  'LOCALAPPDATA',
  'PROGRAMDATA',
  'PROGRAMFILES',
  'PROCESSOR_ARCHITECTURE',
  'NUMBER_OF_PROCESSORS',
];

export interface ChildEnvConfig {
  /** Variables of the gateway's environment passed on besides the base ones (names or `PREFIX*`). */
  inherit_env?: readonly string[];
  /** Variables set for the child (they win over inherited ones). */
  env?: Readonly<Record<string, string>>;
}

/** The child's whole environment, from the gateway's (`source`). */
export function childEnvironment(
  config: ChildEnvConfig,
  source: NodeJS.ProcessEnv,
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  // Windows variable names are case-insensitive (`Path`, `SystemRoot`).
  const fold = platform === 'win32' ? (s: string) => s.toUpperCase() : (s: string) => s;
  const names = new Set<string>();
  const prefixes: string[] = [];
  const patterns = [...baseVariables, ...(platform === 'win32' ? windowsVariables : []), ...(config.inherit_env ?? [])];
  for (const p of patterns) {
    if (p.endsWith('*')) prefixes.push(fold(p.slice(0, -1)));
    else names.add(fold(p));
  }
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined) continue;
    const key = fold(name);
    if (names.has(key) || prefixes.some((p) => key.startsWith(p))) out[name] = value;
  }
  return { ...out, ...config.env };
}
