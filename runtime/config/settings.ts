/**
 * Settings files: an operator-facing file (TOML or YAML) in a service's own vocabulary, e.g.
 *
 *   [switchyard]
 *   template = "./datastore/service.yaml"   # the service graph these settings feed
 *   env_prefix = "DB"
 *
 *   [storage]
 *   path = "../.data/datastore.db"          # → ${DB_STORAGE_PATH} in the template
 *
 * Every key outside `[switchyard]` becomes a variable `<PREFIX>_<SECTION>_<KEY>` (upper case,
 * nested tables joined with `_`) for the template's `${...}` interpolation; a variable set in the
 * environment wins over the file. The template may declare `settings:` (a JSON Schema of the
 * settings) so that a typo or a wrong type is reported at its line in the settings file instead
 * of being ignored. Relative paths in the template resolve against the settings file's directory.
 *
 * Why: a seed may define its own configuration file (sections and keys an operator already knows,
 * each overridable from the environment); the service graph stays an ordinary service config.
 */
import { dirname, resolve } from 'node:path';

export interface SettingsHeader {
  template: string;
  envPrefix: string;
}

/** The `[switchyard]` table of a settings file, or undefined for an ordinary service config. */
export function settingsHeader(value: unknown): SettingsHeader | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const header = (value as Record<string, unknown>).switchyard;
  if (!header || typeof header !== 'object') return undefined;
  const { template, env_prefix } = header as Record<string, unknown>;
  if (typeof template !== 'string') return undefined;
  return { template, envPrefix: typeof env_prefix === 'string' ? env_prefix : '' };
}

export function templatePath(settingsFile: string, header: SettingsHeader): string {
  return resolve(dirname(settingsFile), header.template);
}

/** The settings of a settings file's value, without the header. */
export function settingsOf(value: unknown): Record<string, unknown> {
  const { switchyard: _header, ...settings } = value as Record<string, unknown>;
  return settings;
}

/** Settings with environment overrides applied (as strings; a settings schema coerces them). */
export function withEnvironment(
  settings: Record<string, unknown>,
  header: SettingsHeader,
  env: Record<string, string | undefined>,
): Record<string, unknown> {
  const apply = (table: Record<string, unknown>, prefix: string): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(table)) {
      const name = variableName(prefix, key);
      if (v && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date)) {
        out[key] = apply(v as Record<string, unknown>, name);
        continue;
      }
      const fromEnv = env[name];
      out[key] = fromEnv !== undefined && fromEnv !== '' ? fromEnv : v;
    }
    return out;
  };
  return apply(settings, header.envPrefix);
}

/** Flattens settings into interpolation variables: `{ storage: { path } }` → `DB_STORAGE_PATH`. */
export function settingsVariables(settings: Record<string, unknown>, header: SettingsHeader): Record<string, string> {
  const vars: Record<string, string> = {};
  const walk = (table: Record<string, unknown>, prefix: string) => {
    for (const [key, v] of Object.entries(table)) {
      const name = variableName(prefix, key);
      if (v && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date)) {
        walk(v as Record<string, unknown>, name);
      } else {
        vars[name] = v instanceof Date ? v.toISOString() : Array.isArray(v) ? JSON.stringify(v) : String(v ?? '');
      }
    }
  };
  walk(settings, header.envPrefix);
  return vars;
}

function variableName(prefix: string, key: string): string {
  const k = key.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
  return prefix ? `${prefix.toUpperCase()}_${k}` : k;
}
