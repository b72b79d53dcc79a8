/**
 * Enforcement modes. `strict` rejects, `permissive` forwards but annotates, counts and logs,
 * `audit` forwards and only counts. The service and route `mode` are checked against this list
 * when the config loads (and so is every stage's own `mode` option), so a misspelt mode is a
 * config error, never a silent permissive one.
 */
export const enforcementModes = ['strict', 'permissive', 'audit'] as const;

export type Mode = (typeof enforcementModes)[number];

/**
 * The mode a stage enforces: its own `mode` option, else the route's (which defaults to the
 * service's). No mode anywhere means permissive, as documented; an unknown one cannot reach here.
 */
export function effectiveMode(stageMode: Mode | undefined, routeMode: Mode | undefined): Mode {
  return stageMode ?? routeMode ?? 'permissive';
}
