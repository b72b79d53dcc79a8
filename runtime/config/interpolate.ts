/**
 * `${VAR}` and `${VAR:-default}` in string values, from the environment. `$${` writes a literal
 * `${`. A variable that is unset and has no default is an error naming where it was used.
 */
import type { ConfigPath } from './source.ts';

const pattern = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

export interface InterpolationProblem {
  path: ConfigPath;
  message: string;
}

export function interpolate(
  value: unknown,
  env: Record<string, string | undefined>,
  problems: InterpolationProblem[],
  path: ConfigPath = [],
): unknown {
  if (typeof value === 'string') return interpolateString(value, env, problems, path);
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, problems, [...path, i]));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env, problems, [...path, k]);
    return out;
  }
  return value;
}

function interpolateString(
  s: string,
  env: Record<string, string | undefined>,
  problems: InterpolationProblem[],
  path: ConfigPath,
): string {
  if (!s.includes('${')) return s;
  return s.replace(pattern, (whole, name: string | undefined, fallback: string | undefined) => {
    if (whole === '$${') return '${';
    const v = env[name as string];
    if (v !== undefined && v !== '') return v;
    if (fallback !== undefined) return fallback;
    problems.push({
      path,
      message: `environment variable ${name} is not set and has no default (\${${name}:-default})`,
    });
    return '';
  });
}
