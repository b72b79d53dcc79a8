/**
 * `${VAR}` and `${VAR:-default}` in string values, from the environment. `$${` writes a literal
 * `${`. A variable that is unset and has no default is an error naming where it was used.
 * `${VAR:~default}` is a development default (a credential fit only for loopback): it is used
 * like `:-` but recorded, so that a service listening beyond loopback refuses to start with it
 * (see exposure.ts).
 */
import type { ConfigPath } from './source.ts';

const pattern = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:~)([^}]*))?\}/g;

export interface InterpolationProblem {
  path: ConfigPath;
  message: string;
}

/** A `${VAR:~default}` whose variable was unset, so that the development default is in effect. */
export interface DevelopmentDefault {
  variable: string;
  path: ConfigPath;
}

export function interpolate(
  value: unknown,
  env: Record<string, string | undefined>,
  problems: InterpolationProblem[],
  path: ConfigPath = [],
  developmentDefaults: DevelopmentDefault[] = [],
): unknown {
  if (typeof value === 'string') return interpolateString(value, env, problems, path, developmentDefaults);
  if (Array.isArray(value))
    return value.map((v, i) => interpolate(v, env, problems, [...path, i], developmentDefaults));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = interpolate(v, env, problems, [...path, k], developmentDefaults);
    return out;
  }
  return value;
}

function interpolateString(
  s: string,
  env: Record<string, string | undefined>,
  problems: InterpolationProblem[],
  path: ConfigPath,
  developmentDefaults: DevelopmentDefault[],
): string {
  if (!s.includes('${')) return s;
  return s.replace(
    pattern,
    (whole, name: string | undefined, operator: string | undefined, fallback: string | undefined) => {
      if (whole === '$${') return '${';
      const v = env[name as string];
      if (v !== undefined && v !== '') return v;
      if (fallback !== undefined) {
        if (operator === ':~') developmentDefaults.push({ variable: name as string, path });
        return fallback;
      }
      problems.push({
        path,
        message: `environment variable ${name} is not set and has no default (\${${name}:-default})`,
      });
      return '';
    },
  );
}
