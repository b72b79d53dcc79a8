/**
 * JSON Schema of a tenant, shared by the resource's inline `tenants:` option and the tenants file.
 * An API key is given as its SHA-256 digest, as the name of an environment variable holding it,
 * or (local development only, warned about) in clear. The TypeScript types are inferred from
 * these schemas (`FromSchema`), defaults applied.
 */
import type { FromSchema, JsonSchema } from '../../runtime/index.ts';

export const apiKeySchema = {
  // One form per entry. (Not a oneOf: a mistake then gets one clear error instead of one per form.)
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  maxProperties: 1,
  description: 'Exactly one of `sha256`, `env`, `key`',
  properties: {
    sha256: {
      type: 'string',
      pattern: '^[0-9a-fA-F]{64}$',
      description: 'Hex SHA-256 digest of the key (e.g. `printf %s "$KEY" | sha256sum`)',
    },
    env: {
      type: 'string',
      pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
      description: 'Environment variable holding the key, read when the service loads',
    },
    key: {
      type: 'string',
      minLength: 1,
      description: 'The key in clear: local development only (logged as a warning)',
    },
  },
} as const satisfies JsonSchema;

export const tenantSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'backend', 'policy', 'requests_per_minute', 'api_keys'],
  properties: {
    id: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$', description: 'Tenant id' },
    backend: {
      // One type list rather than a oneOf: a misspelt name is then one error naming it, not three.
      type: ['string', 'array'],
      minLength: 1,
      'x-ref': 'upstream',
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', minLength: 1, 'x-ref': 'upstream' },
      description:
        'Name of the upstream (under `upstreams:`) serving this tenant, or an ordered list of them: providers ' +
        'tried in turn by the proxy (failover on connect failures, timeouts, 5xx and 429)',
    },
    policy: { type: 'string', minLength: 1, description: 'Policy file name, e.g. `default.yaml`' },
    requests_per_minute: { type: 'integer', minimum: 1 },
    tokens_per_minute: {
      type: 'integer',
      minimum: 1,
      description:
        'Prompt and completion tokens per minute (a `token-limit` stage with limit_from enforces it); none: not limited',
    },
    classifiers: {
      type: 'array',
      items: { type: 'string', minLength: 1 },
      default: [],
      description: 'Classifier names run for this tenant',
    },
    api_keys: { type: 'array', minItems: 1, items: apiKeySchema },
  },
} as const satisfies JsonSchema;

/** A tenants file: `tenants: [...]`. */
export const tenantsFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['tenants'],
  properties: { tenants: { type: 'array', items: tenantSchema } },
} as const satisfies JsonSchema;

/**
 * One API key: the schema allows exactly one of the three properties (min/maxProperties), which the
 * inferred type does not say, so each is optional here.
 */
export type ApiKeySpec = FromSchema<typeof apiKeySchema>;

/** A tenant as the schema gives it (`classifiers` defaulted to `[]`, in a file and inline alike). */
export type TenantSpec = FromSchema<typeof tenantSchema>;
