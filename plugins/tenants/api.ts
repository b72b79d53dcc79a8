/**
 * Public contract of the tenants plugin: the value of a `tenant-directory` resource. Other plugins
 * (tenant-info endpoints, policy stages) import this file only.
 */

/** A tenant as the gateway uses it. API keys are not part of it: they never leave the directory. */
export interface Tenant {
  id: string;
  /** Name of the upstream (under `upstreams:`) this tenant's requests go to: the first of `backends`. */
  backend: string;
  /** The upstreams serving this tenant, in the order they are tried (one unless it has failover providers). */
  backends: readonly string[];
  /** The first backend's URL, for reports (`/admin/tenants`). */
  backendUrl: string;
  /** Policy file name the policy stage applies to this tenant, e.g. `default.yaml`. */
  policy: string;
  requests_per_minute: number;
  /** Tokens per minute for the `token-limit` stage; undefined: no token limit. */
  tokens_per_minute?: number;
  /** Names of the classifiers run for this tenant. */
  classifiers: readonly string[];
}

export interface TenantDirectory {
  /** Every tenant, in file order. */
  list(): readonly Tenant[];
  /** The tenant owning API key `key` (a header value as Node gives it), or undefined. */
  byKey(key: string): Tenant | undefined;
  get(id: string): Tenant | undefined;
}
