/**
 * How the safety-filter benchmarks run the filter: the measured tenant and the `--set` overrides
 * that put the filter on free ports in front of the bench backend. Shared by run.ts, ablate.ts
 * and profile-filter.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { freePort } from '../typed-proxy/children.ts';

/**
 * Writes the measured tenant into `dir` (returns the file): the dev tenant's key and policy, the
 * Tier A classifiers (or `classifiers`), a request limit the load cannot reach (and `tokensPerMinute`); its backend is the upstream `upstream`.
 */
export function writeBenchTenants(
  dir: string,
  key: string,
  upstream = 'llm',
  classifiers = ['pii', 'secrets', 'prompt_injection'],
  tokensPerMinute?: number,
): string {
  const file = join(dir, 'tenants.yaml');
  writeFileSync(
    file,
    `tenants:\n  - id: bench\n    backend: ${upstream}\n    policy: default.yaml\n` +
      `    requests_per_minute: 100000000\n` +
      (tokensPerMinute === undefined ? '' : `    tokens_per_minute: ${tokensPerMinute}\n`) +
      `    classifiers: [${classifiers.join(', ')}]\n` +
      `    api_keys: [{ key: ${JSON.stringify(key)} }]\n`,
  );
  return file;
}

/**
 * What the measured tenant checks: `shipped` (the default), the classifiers of the shipped
 * development tenant (configs/safety-filter/tenants.yaml under `root`: Tier B included) and a token
 * limit the load cannot reach, as `npm run bench` measures; `tier-a`, the Tier A classifiers and no
 * token limit (what these benchmarks measured before 2026-12-01). The last two arguments of
 * writeBenchTenants.
 */
export function benchTenantWork(root: string, choice = 'shipped'): [string[], number | undefined] {
  if (choice === 'tier-a') return [['pii', 'secrets', 'prompt_injection'], undefined];
  if (choice !== 'shipped') throw new Error(`unknown tenant choice "${choice}": shipped or tier-a`);
  const file = join(root, 'configs/safety-filter/tenants.yaml');
  const { tenants } = parseYaml(readFileSync(file, 'utf8')) as {
    tenants: Array<{ id: string; classifiers: string[] }>;
  };
  const dev = tenants.find((t) => t.id === 'dev');
  if (!dev) throw new Error(`${file} has no dev tenant`);
  return [dev.classifiers, 1e12];
}

/**
 * `--set` overrides: the main listener (and each of `listeners` the config declares) on a free
 * port, the upstream `upstream` pointed at the OpenAI-compatible bench backend.
 */
export async function filterSets(
  backendPort: number,
  o: { upstream?: string; listeners?: string[] } = {},
): Promise<{ port: number; sets: string[] }> {
  const port = await freePort();
  const sets = [`listen.port=${port}`];
  for (const listener of o.listeners ?? ['metrics', 'admin']) sets.push(`${listener}.port=${await freePort()}`);
  sets.push(`upstreams.${o.upstream ?? 'llm'}={kind: openai, url: "http://127.0.0.1:${backendPort}/v1"}`);
  return { port, sets };
}
