/**
 * `--set a.b.c=value` overrides. Numeric segments index arrays; the value is read as a YAML
 * scalar, so `--set listen.port=8080` sets a number and `--set auth.enabled=true` a boolean.
 */
import { parse } from 'yaml';

export function parseOverride(spec: string): { path: Array<string | number>; value: unknown } {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new Error(`--set expects path=value, got "${spec}"`);
  const path = spec
    .slice(0, eq)
    .split('.')
    .map((seg) => (/^\d+$/.test(seg) ? Number(seg) : seg));
  const raw = spec.slice(eq + 1);
  let value: unknown;
  try {
    value = parse(raw);
  } catch {
    value = raw;
  }
  return { path, value: value === null && raw !== 'null' && raw !== '~' ? raw : value };
}

export function applyOverride(target: unknown, path: Array<string | number>, value: unknown): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path as [string | number, ...Array<string | number>];
  const container: Record<string | number, unknown> =
    target !== null && typeof target === 'object'
      ? (target as Record<string | number, unknown>)
      : typeof head === 'number'
        ? ([] as unknown as Record<number, unknown>)
        : {};
  container[head] = applyOverride(container[head], rest, value);
  return container;
}
