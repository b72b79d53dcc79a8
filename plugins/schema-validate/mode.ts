/**
 * Enforcement modes: the runtime's (runtime/mode.ts). `strict` rejects, `permissive` forwards but
 * annotates, counts and logs, `audit` forwards and only counts. A stage's own `mode` option wins
 * over the route's; no mode at all means permissive. Both are enums checked at load, so an
 * unknown mode never reaches a stage.
 */
export { effectiveMode, enforcementModes as modes, type Mode } from '../../runtime/index.ts';
