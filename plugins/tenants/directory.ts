/**
 * Builds the tenant directory from tenant specs: resolves each backend to a declared upstream,
 * turns every API key into its SHA-256 digest and indexes tenants by digest.
 *
 * Key lookup: the presented key is hashed and the digest looked up in a Map. No key (presented or
 * configured) is ever compared as such, so the time a lookup takes depends on the digest only,
 * which tells an attacker nothing useful about any key (finding a key from its digest is a
 * preimage attack on SHA-256). Keys in clear exist only in process memory for the moment it takes
 * to hash them; the directory keeps digests.
 */
import { createHash, hash } from 'node:crypto';
import type { Logger } from 'pino';
import { isHttpUpstream, type Upstream } from '../../runtime/index.ts';
import type { Tenant, TenantDirectory } from './api.ts';
import type { ApiKeySpec, TenantSpec } from './schema.ts';

export interface DirectoryDeps {
  upstream(name: string): Upstream;
  logger: Logger;
  /** Where `{ env: VAR }` keys are read (the process environment). */
  environment: NodeJS.ProcessEnv;
  /** A listener binds beyond loopback: keys in clear (development only) are refused. */
  exposed?: boolean;
}

export function buildDirectory(specs: TenantSpec[], deps: DirectoryDeps): TenantDirectory {
  const byId = new Map<string, Tenant>();
  const byDigest = new Map<string, Tenant>();
  const inClear: string[] = [];

  for (const spec of specs) {
    const where = `tenant "${spec.id}"`;
    if (byId.has(spec.id)) throw new Error(`${where} is declared twice`);
    const backends = Object.freeze(typeof spec.backend === 'string' ? [spec.backend] : [...spec.backend]);
    const urls = backends.map((name) => backendUrl(name, deps.upstream, where));
    const tenant = Object.freeze({
      id: spec.id,
      backend: backends[0] as string,
      backends,
      backendUrl: urls[0] as string,
      policy: spec.policy,
      requests_per_minute: spec.requests_per_minute,
      tokens_per_minute: spec.tokens_per_minute,
      classifiers: Object.freeze([...spec.classifiers]),
    });
    byId.set(tenant.id, tenant);
    spec.api_keys.forEach((keySpec, i) => {
      const digest = keyDigest(keySpec, deps.environment, `${where}: api_keys[${i}]`);
      const owner = byDigest.get(digest);
      if (owner) {
        // Never name the key; naming the tenants is enough to find it.
        throw new Error(
          owner.id === tenant.id
            ? `${where}: api_keys[${i}] repeats another key of the tenant`
            : `${where}: api_keys[${i}] is also a key of tenant "${owner.id}"`,
        );
      }
      byDigest.set(digest, tenant);
      if ('key' in keySpec && !inClear.includes(tenant.id)) inClear.push(tenant.id);
    });
  }

  if (inClear.length > 0 && deps.exposed) {
    throw new Error(
      `tenant API keys in clear (development only) for ${inClear.map((t) => `"${t}"`).join(', ')} while the service listens beyond loopback: use { sha256: <hex digest> } or { env: VAR }`,
    );
  }
  if (inClear.length > 0) {
    deps.logger.warn(
      { tenants: inClear },
      'tenant API keys are configured in clear (local development only): use { sha256: <hex digest> } or { env: VAR }',
    );
  }

  const list = Object.freeze([...byId.values()]);
  return {
    list: () => list,
    get: (id) => byId.get(id),
    byKey: (key) => byDigest.get(presentedDigest(key)),
  };
}

function backendUrl(name: string, upstream: DirectoryDeps['upstream'], where: string): string {
  let u: Upstream;
  try {
    u = upstream(name);
  } catch (err) {
    throw new Error(`${where}: backend: ${(err as Error).message}`);
  }
  if (!isHttpUpstream(u)) throw new Error(`${where}: backend "${name}" is a ${u.kind} upstream, not an HTTP one`);
  return u.url.href;
}

/** Hex SHA-256 of a configured key (UTF-8), from any of its forms. */
function keyDigest(spec: ApiKeySpec, environment: NodeJS.ProcessEnv, where: string): string {
  // The schema admits exactly one of sha256, env and key; none at all reads as an empty key.
  if (spec.sha256 !== undefined) return spec.sha256.toLowerCase();
  const key = spec.env !== undefined ? environment[spec.env] : spec.key;
  if (spec.env !== undefined && (key === undefined || key === '')) {
    throw new Error(`${where}: environment variable ${spec.env} is not set`);
  }
  if (!key || key.trim() === '') throw new Error(`${where}: the key is empty`);
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/**
 * Hex SHA-256 of a presented key. Node gives header values one char per byte (latin1), so hashing
 * them as latin1 hashes the bytes the client sent: a UTF-8 key matches its configured digest.
 */
function presentedDigest(key: string): string {
  // One-shot hash (no Hash object per request).
  return hash('sha256', Buffer.from(key, 'latin1'), 'hex');
}
