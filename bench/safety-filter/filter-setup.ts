/**
 * How the safety-filter benchmarks run the filter: the measured tenant and the `--set` overrides
 * that put the filter on free ports in front of the bench backend. Shared by run.ts, ablate.ts
 * and profile-filter.ts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
