/**
 * Enforcement modes. `strict` rejects, `permissive` forwards but annotates, counts and logs,
 * `audit` forwards and only counts. A stage's own `mode` option wins over the route's mode; a
 * route mode this stage does not know (or none) means permissive.
 */
export type Mode = 'strict' | 'permissive' | 'audit';

export const modes: readonly Mode[] = ['strict', 'permissive', 'audit'];

export function effectiveMode(option: Mode | undefined, routeMode: string | undefined): Mode {
  if (option) return option;
  return routeMode === 'strict' || routeMode === 'audit' ? routeMode : 'permissive';
}
