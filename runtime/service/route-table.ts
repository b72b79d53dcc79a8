/**
 * Route resolution done at load where it can be: for every path a route declares literally
 * (`/health`, `/v1/chat/completions`), the routes whose pattern matches that exact path string,
 * in config order. A request for such a path tries only those (usually one) instead of every
 * route's pattern in turn; any other path (parameters, another spelling: `/Health`, `/health/`)
 * is matched against every route as before. The candidates are found with the routes' own
 * matchers on the same string, so the route chosen is the one the full scan would choose.
 */
import type { CompiledRoute } from './graph.ts';

/** Characters with a meaning in a path-to-regexp pattern: a path with none of them is literal. */
const patternSyntax = /[{}()[\]+?!:*\\]/;

export function literalPathRoutes(routes: readonly CompiledRoute[]): Map<string, CompiledRoute[]> {
  const table = new Map<string, CompiledRoute[]>();
  for (const route of routes) {
    const path = route.path;
    if (patternSyntax.test(path) || table.has(path)) continue;
    const matching = matchingRoutes(routes, path);
    if (matching) table.set(path, matching);
  }
  return table;
}

/** The routes whose pattern matches `path`; undefined when a matcher throws (that path keeps the full scan). */
function matchingRoutes(routes: readonly CompiledRoute[], path: string): CompiledRoute[] | undefined {
  try {
    return routes.filter((r) => r.match(path) !== false);
  } catch {
    return undefined;
  }
}
