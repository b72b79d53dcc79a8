/**
 * The plugin catalog: every stage plugin and resource type this process knows, from the
 * project's `plugins/` folder and from npm packages a config names (`plugins: [pkg]`).
 * A package's default export is a definition or an array of definitions.
 */
import { readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AnyDefinition, PluginDefinition, ResourceDefinition } from './plugin.ts';

export interface Catalog {
  stage(name: string): PluginDefinition<Record<string, unknown>> | undefined;
  resource(type: string): ResourceDefinition<Record<string, unknown>> | undefined;
  all(): AnyDefinition[];
}

const builtinDir = fileURLToPath(new URL('../plugins/', import.meta.url));
let builtins: Promise<AnyDefinition[]> | undefined;

async function loadBuiltins(): Promise<AnyDefinition[]> {
  const defs: AnyDefinition[] = [];
  for (const entry of readdirSync(builtinDir).sort()) {
    const index = join(builtinDir, entry, 'index.ts');
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
  }
  return list as AnyDefinition[];
}

/** Loads the built-in plugins plus the packages named by a config, resolved from its directory. */
export async function loadCatalog(packages: string[] = [], fromDir = process.cwd()): Promise<Catalog> {
  builtins ??= loadBuiltins();
  const defs = [...(await builtins)];
  const require = createRequire(join(fromDir, 'noop.js'));
  for (const pkg of packages) {
    let resolved: string;
    try {
      resolved = require.resolve(pkg);
    } catch {
      throw new Error(`plugin package "${pkg}" not found from ${fromDir} (npm install it)`);
    }
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
  };
}
