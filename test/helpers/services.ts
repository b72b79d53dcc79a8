/**
 * Services for tests, started from YAML written on the spot: the service file, the shipped
 * registry as a resource, and the POST an MCP client sends.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The shipped registry (configs/registry) as a resource, in YAML flow style: `registry: ${shippedRegistryYaml}`. */
export const shippedRegistryYaml = `{ type: stype-registry, dir: ${JSON.stringify(resolve(import.meta.dirname, '../../configs/registry'))}, namespace: everything }`;

/** Writes `yaml` as service.yaml in `dir` (a new temporary one unless given); returns its path. */
export function writeServiceFile(yaml: string, dir = mkdtempSync(join(tmpdir(), 'sy-test-'))): string {
  const file = join(dir, 'service.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** POSTs `body` as JSON the way an MCP client does (accepting a JSON or an SSE answer). */
export function postRpc(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}
