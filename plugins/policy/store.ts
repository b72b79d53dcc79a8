/**
 * Where policies come from (a registry's policy documents, policy files, every file of a
 * directory) and the live set built from them. A reload builds a whole new set first; if any
 * file is broken the error is thrown and the current set stays.
 */
import { readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { STypeRegistry } from '../stype-registry/api.ts';
import { PolicySet } from './engine.ts';
import { compilePolicy, type Policy, readPolicyFile } from './format.ts';

export interface PolicySources {
  registry?: STypeRegistry;
  /** Policy files (absolute paths). */
  files: string[];
  /** Directories whose `*.yaml`, `*.yml` and `*.json` files are all loaded (absolute paths). */
  dirs: string[];
  /** Policy names that must be loaded. */
  required?: string[];
}

export async function loadPolicies(sources: PolicySources): Promise<PolicySet> {
  const loaded: Policy[] = [];
  for (const doc of sources.registry?.policies() ?? []) {
    loaded.push(compilePolicy(doc, doc.source ?? `registry policy "${doc.name}"`));
  }
  const files = [...sources.files];
  for (const dir of sources.dirs) {
    let entries: string[];
    try {
      entries = await readdir(dir);
    } catch (err) {
      throw new Error(`${dir}: cannot read policy directory: ${(err as Error).message}`);
    }
    for (const f of entries.sort()) if (/\.(ya?ml|json)$/.test(f)) files.push(join(dir, f));
  }
  for (const file of files) {
    for (const doc of await readPolicyFile(file)) loaded.push({ ...compilePolicy(doc, file), file: basename(file) });
  }
  const seen = new Map<string, string>();
  for (const p of loaded) {
    const other = seen.get(p.name);
    if (other) throw new Error(`policy "${p.name}" is defined twice: ${other} and ${p.source}`);
    seen.set(p.name, p.source);
  }
  for (const name of sources.required ?? []) {
    if (!seen.has(name)) throw new Error(`policy "${name}" is not loaded (loaded: ${[...seen.keys()].join(', ')})`);
  }
  for (const record of sources.registry?.list() ?? []) {
    for (const name of record.policies) {
      if (!seen.has(name)) throw new Error(`SType "${record.id}" lists policy "${name}", which is not loaded`);
    }
  }
  return new PolicySet(loaded);
}

/** The live policy set; stages read `current` per request, so a reload takes effect at once. */
export class PolicyStore {
  constructor(
    public current: PolicySet,
    private readonly sources: PolicySources,
  ) {}

  static async open(sources: PolicySources): Promise<PolicyStore> {
    return new PolicyStore(await loadPolicies(sources), sources);
  }

  /** Re-reads every source; throws (keeping the current set) when the new set is broken. */
  async reload(): Promise<PolicySet> {
    this.current = await loadPolicies(this.sources);
    return this.current;
  }

  /** Policy files and names, for status reports. */
  describe(): Array<{ name: string; source: string; file?: string; rules: number }> {
    return this.current.policies.map((p) => ({ name: p.name, source: p.source, file: p.file, rules: p.rules.length }));
  }
}
