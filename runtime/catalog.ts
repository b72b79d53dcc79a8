/**
 * The plugin catalog: every stage plugin and resource type this process knows, from the
 * project's `plugins/` folder and from npm packages a config names (`plugins: [pkg]`).
 * A package's default export is a definition or an array of definitions.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AnyDefinition, PluginDefinition, ResourceDefinition } from './plugin.ts';

export interface Catalog {
  stage(name: string): PluginDefinition<Record<string, unknown>> | undefined;
  resource(type: string): ResourceDefinition<Record<string, unknown>> | undefined;
  all(): AnyDefinition[];
  /** Names of the stage plugins, for "did you mean". */
  stageNames(): Iterable<string>;
  /** Types of the resources, for "did you mean". */
  resourceTypes(): Iterable<string>;
  /** Where a definition comes from: `plugins/<folder>` or the package a config names. */
  origin(def: AnyDefinition): string;
}

/** The folder or package each definition was loaded from (`switchyard plugins`). */
const origins = new WeakMap<object, string>();

const builtinDir = fileURLToPath(new URL('../plugins/', import.meta.url));
/** `.ts` when running the sources (tsx), `.js` when running the compiled build (dist/). */
const moduleExtension = import.meta.url.endsWith('.js') ? '.js' : '.ts';
let builtins: Promise<AnyDefinition[]> | undefined;

async function loadBuiltins(): Promise<AnyDefinition[]> {
  const defs: AnyDefinition[] = [];
  for (const entry of readdirSync(builtinDir).sort()) {
    const index = join(builtinDir, entry, `index${moduleExtension}`);
    try {
      if (!statSync(index).isFile()) continue;
    } catch {
      continue;
    }
    const mod = (await import(pathToFileURL(index).href)) as { default?: unknown };
    defs.push(...asDefinitions(mod.default, `plugins/${entry}`));
  }
  return defs;
}

function asDefinitions(value: unknown, from: string): AnyDefinition[] {
  const list = Array.isArray(value) ? value : [value];
  for (const d of list) {
    const def = d as Partial<AnyDefinition> | undefined;
    if (!def || (def.kind !== 'stage' && def.kind !== 'resource')) {
      throw new Error(`${from}: default export is not a plugin definition (use definePlugin or defineResource)`);
    }
    origins.set(def, from);
  }
  return list as AnyDefinition[];
}

/** Loads the built-in plugins plus the packages named by a config, resolved from its directory. */
export async function loadCatalog(packages: string[] = [], fromDir = process.cwd()): Promise<Catalog> {
  builtins ??= loadBuiltins();
  const defs = [...(await builtins)];
  for (const pkg of packages) {
    const resolved = resolvePlugin(pkg, fromDir);
    const mod = (await import(pathToFileURL(resolved).href)) as { default?: unknown };
    defs.push(...asDefinitions(mod.default, pkg));
  }
  const stages = new Map<string, PluginDefinition<Record<string, unknown>>>();
  const resources = new Map<string, ResourceDefinition<Record<string, unknown>>>();
  for (const d of defs) {
    if (d.kind === 'stage') stages.set(d.name, d as unknown as PluginDefinition<Record<string, unknown>>);
    else resources.set(d.type, d as unknown as ResourceDefinition<Record<string, unknown>>);
  }
  return {
    stage: (name) => stages.get(name),
    resource: (type) => resources.get(type),
    all: () => defs,
    stageNames: () => stages.keys(),
    resourceTypes: () => resources.keys(),
    origin: (def) => origins.get(def) ?? '?',
  };
}

/**
 * Where `import(specifier)` would load from a module in `fromDir`. Node 20 has no public ESM
 * resolver with a chosen parent (`import.meta.resolve(s, parent)` needs a flag), and
 * `require.resolve` misses packages whose `exports` only has an `import` condition. So: find
 * the package with Node's own lookup paths, then read its `exports` with the conditions of an
 * ESM import. Packages without `exports`, and file paths, resolve as `require` would.
 */
export function resolvePlugin(specifier: string, fromDir: string): string {
  const require = createRequire(join(fromDir, 'noop.js'));
  const bare = !specifier.startsWith('.') && !isAbsolute(specifier) && !specifier.startsWith('file:');
  const [, name, subpath] = /^((?:@[^/]+\/)?[^/]+)(\/.*)?$/.exec(specifier) ?? [];
  if (bare && name) {
    for (const dir of require.resolve.paths(name) ?? []) {
      const pkgDir = join(dir, name);
      let manifest: { exports?: unknown };
      try {
        manifest = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
      } catch {
        continue;
      }
      if (manifest.exports === undefined) break;
      const target = exportsTarget(manifest.exports, `.${subpath ?? ''}`);
      if (!target)
        throw new Error(`plugin package "${specifier}": "${name}" exports no "${subpath ?? '.'}" for import`);
      return join(pkgDir, target);
    }
  }
  try {
    return require.resolve(specifier.startsWith('file:') ? fileURLToPath(specifier) : specifier);
  } catch {
    throw new Error(`plugin package "${specifier}" not found from ${fromDir} (npm install it)`);
  }
}

const importConditions = new Set(['node', 'import', 'default']);

/** The file `exports` maps `subpath` to for an ESM import (exact keys and `*` patterns). */
function exportsTarget(exports: unknown, subpath: string): string | undefined {
  const isSubpathMap =
    typeof exports === 'object' &&
    exports !== null &&
    !Array.isArray(exports) &&
    Object.keys(exports)[0]?.startsWith('.');
  const map = isSubpathMap ? (exports as Record<string, unknown>) : { '.': exports };
  if (subpath in map) return conditionTarget(map[subpath], '');
  // As in Node, the pattern with the longest prefix before its `*` wins.
  let best: { key: string; prefix: string; star: string } | undefined;
  for (const key of Object.keys(map)) {
    const [prefix, suffix, extra] = key.split('*');
    if (prefix === undefined || suffix === undefined || extra !== undefined) continue;
    if (subpath.length < key.length || !subpath.startsWith(prefix) || !subpath.endsWith(suffix)) continue;
    if (best && best.prefix.length >= prefix.length) continue;
    best = { key, prefix, star: subpath.slice(prefix.length, subpath.length - suffix.length) };
  }
  return best ? conditionTarget(map[best.key], best.star) : undefined;
}

function conditionTarget(target: unknown, star: string): string | undefined {
  if (typeof target === 'string') return target.replaceAll('*', star);
  if (Array.isArray(target)) {
    for (const t of target) {
      const found = conditionTarget(t, star);
      if (found) return found;
    }
    return undefined;
  }
  if (typeof target === 'object' && target !== null) {
    // Conditions are tried in the order the package lists them.
    for (const [condition, t] of Object.entries(target)) {
      if (!importConditions.has(condition)) continue;
      const found = conditionTarget(t, star);
      if (found) return found;
    }
  }
  return undefined;
}
