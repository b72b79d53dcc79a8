/**
 * Config of one entry of a service's `upstreams:` map (snake_case, as written in YAML): its JSON
 * Schema is the one source. The TypeScript types are inferred from the schema of each kind's
 * branch (`FromSchema`, runtime/config/from-schema.ts), and the defaults an upstream runs with are
 * the schema's, applied by the same validator as plugin options (runtime/config/options.ts), so
 * that an upstream built from a hand-written object behaves like one built from a validated
 * config. What the schema cannot say (a default computed from another field, a list that is empty
 * when absent) is resolved here, once.
 */
import type { FromSchema } from '../config/from-schema.ts';
import { withDefaults } from '../config/options.ts';
import { childEnvironment } from './child-env.ts';

const ms = (def: number, min = 1) => ({ type: 'integer', minimum: min, default: def }) as const;

const urlSchema = {
  type: 'string',
  pattern: '^https?://',
  description: 'Base URL; request paths are appended to its path.',
} as const;

const share = { type: 'number', exclusiveMinimum: 0, maximum: 1 } as const;
/** Several endpoints and how they are balanced; no schema defaults here, so a single-`url` config stays as written. */
export const balancingProperties = {
  endpoints: {
    type: 'array',
    minItems: 1,
    items: {
      type: 'object',
      additionalProperties: false,
      required: ['url'],
      properties: {
        url: urlSchema,
        weight: { type: 'integer', minimum: 1, maximum: 1000, default: 1, description: 'Relative share of requests.' },
      },
    },
    description: 'Several endpoints of one upstream (instead of `url`), balanced by `balance`.',
  },
  balance: {
    enum: ['round-robin', 'least-request', 'consistent-hash'],
    description:
      '`round-robin` (weighted; default), `least-request` (the less busy of two picks) or ' +
      '`consistent-hash` (a ring keyed by `hash_on`; the next endpoint on it when one is out).',
  },
  hash_on: {
    type: 'object',
    additionalProperties: false,
    required: ['header'],
    properties: {
      header: {
        type: 'string',
        pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$",
        description: 'The request header whose value is hashed; requests without it go round-robin.',
      },
    },
    description: '`balance: consistent-hash` only: the request value that picks the endpoint.',
  },
  outlier: {
    type: 'object',
    additionalProperties: false,
    properties: {
      consecutive_failures: { ...ms(5), description: 'Failures in a row (connect, timeout, 5xx) that eject.' },
      base_ejection_ms: { ...ms(30000), description: 'First ejection; doubled at each repeat.' },
      max_ejection_ms: ms(300000),
      max_ejected_share: { ...share, default: 0.5, description: 'Share of the endpoints ejected at most.' },
    },
    description: 'Passive outlier ejection of endpoints (only with `endpoints`).',
  },
  retry: {
    type: 'object',
    additionalProperties: false,
    properties: {
      attempts: {
        type: 'integer',
        minimum: 1,
        maximum: 10,
        default: 2,
        description:
          'Tries in all (the first included); each retry goes to an endpoint not tried yet when there is one.',
      },
      on: {
        type: 'array',
        uniqueItems: true,
        items: {
          anyOf: [{ enum: ['connect_failure', 'reset', 'timeout'] }, { type: 'integer', minimum: 400, maximum: 599 }],
        },
        default: ['connect_failure'],
        description:
          'What is retried: `connect_failure` (any method), `reset` and `timeout` (idempotent methods only), ' +
          'answer statuses (idempotent methods; 429 and 503 for any method). Never a streamed request body.',
      },
      backoff: {
        type: 'object',
        additionalProperties: false,
        properties: {
          base_ms: { ...ms(25, 0), description: 'Backoff of the first retry (full jitter: uniform up to it).' },
          max_ms: { ...ms(250, 0), description: 'Backoff at most (it doubles at each retry).' },
        },
      },
      max_retry_after_ms: {
        ...ms(5000, 0),
        description: 'A Retry-After up to this is waited for; a longer one ends the retries (passed to the client).',
      },
      per_try_timeout_ms: {
        type: 'integer',
        minimum: 1,
        description: "Time allowed for each try's response headers; default: what is left of timeout_ms.",
      },
      budget: {
        type: 'object',
        additionalProperties: false,
        properties: {
          percent: {
            type: 'number',
            minimum: 0,
            maximum: 100,
            default: 20,
            description: 'Retries under way at most, as a percentage of the live requests.',
          },
          min_concurrency: { ...ms(3, 0), description: 'Retries under way always allowed, whatever the share.' },
        },
      },
    },
    description: 'Retries of failed tries, where safe, within a budget (with `url` too: on that one endpoint).',
  },
} as const;

/**
 * An OpenAI-compatible provider's credentials and model names (provider.ts applies them). The key
 * is named, never written in the config: the config (and its hash, logs, reports) never holds it.
 */
const providerProperties = {
  api_key_env: {
    type: 'string',
    pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
    description:
      "Environment variable holding the provider's API key, read at load (an unset one is an error); sent as " +
      "`Authorization: Bearer <key>`, replacing any client's.",
  },
  model_map: {
    type: 'object',
    propertyNames: { minLength: 1 },
    additionalProperties: { type: 'string', minLength: 1 },
    description:
      "The request's `model` renamed for this provider, e.g. `{gpt-4o: gpt-4o-2024-08-06}`; others pass as sent.",
  },
} as const;

/** Pending and active bounds (runtime/upstreams/slots.ts). */
const slotProperties = {
  max_active: {
    type: 'integer',
    minimum: 1,
    description:
      "Requests under way at once (until their answer's body ends), all endpoints together; more wait (max_pending).",
  },
  max_pending: {
    type: 'integer',
    minimum: 0,
    description:
      'Requests waiting for a slot at most (503 unavailable beyond); default with max_active: none waits ' +
      'longer than timeout_ms; alone: the slots are the connections of the pools.',
  },
} as const;

/** Exactly one of `url` and `endpoints`: with endpoints a url is refused by name, without them it is required. */
const urlOrEndpoints = {
  if: { properties: { endpoints: true }, required: ['endpoints'] },
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
  then: { properties: { url: false } },
  else: { properties: { url: true }, required: ['url'] },
} as const;

/** A hash needs its key; a key without the hash would be silently unused. */
const hashNeedsKey = {
  if: { properties: { balance: { const: 'consistent-hash' } }, required: ['balance'] },
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
  then: { properties: { hash_on: true }, required: ['hash_on'] },
  else: { properties: { hash_on: false } },
} as const;

const balancingNeedsEndpoints = {
  balance: ['endpoints'],
  hash_on: ['endpoints', 'balance'],
  outlier: ['endpoints'],
} as const;

/** The pool and time bounds of every endpoint. */
const poolProperties = {
  connect_timeout_ms: ms(5000),
  timeout_ms: {
    ...ms(30000),
    description:
      'Time allowed for the response headers (504 after it); a streamed answer that a stage reads whole must ' +
      'also be complete within it from its headers.',
  },
  body_timeout_ms: { ...ms(0, 0), description: 'Idle time allowed between body chunks; 0 = none (SSE).' },
  connections: { ...ms(64), description: 'Connection pool size.' },
  max_requests: {
    type: 'integer',
    minimum: 1,
    description:
      'Circuit breaking: calls in flight at most (503 unavailable beyond, Retry-After: 1); default: no bound.',
  },
} as const;

/**
 * The active check of each endpoint (the background probe): a TCP connect by default, a GET of
 * `path`, or (jsonrpc) a JSON-RPC call of `jsonrpc_method` (e.g. `ping`; with `protocol: mcp` in a
 * session of the check's own). Down after `unhealthy_threshold` failures in a row, up again after
 * `healthy_threshold` passes in a row.
 */
const checkProperties = {
  interval_ms: ms(2000, 100),
  path: {
    type: 'string',
    pattern: '^/',
    description: 'GET this path (passes below 500, or on `expect_status`); default: a TCP connect.',
  },
  timeout_ms: {
    type: 'integer',
    minimum: 1,
    description: "Time allowed for one check (default: the upstream's connect_timeout_ms).",
  },
  unhealthy_threshold: {
    type: 'integer',
    minimum: 1,
    maximum: 100,
    default: 1,
    description: 'Checks failed in a row that mark the endpoint down (not picked).',
  },
  healthy_threshold: {
    type: 'integer',
    minimum: 1,
    maximum: 100,
    default: 1,
    description: 'Checks passed in a row that bring a down endpoint back.',
  },
  expect_status: {
    type: 'array',
    minItems: 1,
    items: { type: 'integer', minimum: 100, maximum: 599 },
    description: '`path` checks: the statuses that pass (default: any below 500).',
  },
} as const;

const { interval_ms, path, ...checkRest } = checkProperties;
/** A jsonrpc upstream's check may call a method instead (one kind of check: not with `path`). */
const rpcHealthCheck = {
  type: 'object',
  additionalProperties: false,
  // One kind of check: a path and a method together would leave one silently unused.
  dependentSchemas: { path: { properties: { jsonrpc_method: false } } },
  properties: {
    interval_ms,
    path,
    jsonrpc_method: {
      type: 'string',
      minLength: 1,
      description:
        'POST this JSON-RPC method (e.g. `ping`; with `protocol: mcp` in a session of its own); ' +
        'passes on a result. Exclusive with `path`.',
    },
    ...checkRest,
  },
} as const;

const protocol = { enum: ['mcp', 'jsonrpc'] } as const;

/**
 * `http` / `openai` upstreams also take `retry:` with a single `url` and the slot bounds
 * (`max_active`, `max_pending`), and (`openai` only, refused on `http` by the dispatch below) a
 * provider's key and model names.
 */
const plainHttpSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['kind'],
  ...urlOrEndpoints,
  dependentRequired: balancingNeedsEndpoints,
  allOf: [hashNeedsKey],
  properties: {
    kind: { enum: ['http', 'openai'] },
    url: urlSchema,
    ...balancingProperties,
    ...poolProperties,
    ...slotProperties,
    keep_alive_timeout_ms: ms(60000),
    health_check: { type: 'object', additionalProperties: false, properties: checkProperties },
    ...providerProperties,
  },
} as const;

/**
 * A `jsonrpc` upstream takes `retry:` only with `endpoints` (its calls go through the balancer
 * then) and no slot bounds, so neither is accepted and silently unused. Balanced too: an MCP
 * session sticks to the endpoint that issued it (jsonrpc-balanced.ts).
 */
const jsonrpcSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['kind'],
  ...urlOrEndpoints,
  dependentRequired: { ...balancingNeedsEndpoints, retry: ['endpoints'] },
  allOf: [hashNeedsKey],
  properties: {
    kind: { enum: ['jsonrpc'] },
    url: urlSchema,
    ...balancingProperties,
    ...poolProperties,
    keep_alive_timeout_ms: ms(60000),
    health_check: rpcHealthCheck,
    protocol: { ...protocol, default: 'jsonrpc' },
  },
} as const;

const stdioSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'command'],
  properties: {
    kind: { const: 'stdio' },
    command: { type: 'string', minLength: 1 },
    args: { type: 'array', items: { type: 'string' } },
    env: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description: "Variables set in the child's environment (they win over inherited ones).",
    },
    inherit_env: {
      type: 'array',
      uniqueItems: true,
      items: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*\\*?$' },
      description:
        "Variables of the gateway's environment the child gets besides PATH, HOME, USER, LOGNAME, SHELL, TERM, " +
        'the locale (LANG, LANGUAGE, LC_*), TZ and TMPDIR (and on Windows its system variables): names, or ' +
        "prefixes ending in `*` (e.g. `npm_config_*`). Nothing else of the gateway's environment (its tokens, " +
        'database URLs, provider keys) reaches the child.',
    },
    cwd: { type: 'string', description: "Resolved against the config file's directory." },
    restart: {
      type: 'object',
      additionalProperties: false,
      properties: { initial_delay_ms: ms(200), max_delay_ms: ms(10000) },
    },
    protocol: { enum: ['mcp', 'jsonrpc'], default: 'mcp' },
    call_timeout_ms: ms(30000),
    max_requests: {
      type: 'integer',
      minimum: 1,
      description:
        'Circuit breaking: calls in flight at most (503 unavailable beyond, Retry-After: 1); default: no bound.',
    },
    sessions: {
      enum: ['per-client', 'shared'],
      default: 'per-client',
      description:
        'MCP client sessions: `per-client` runs one child per session (spawned at initialize, ' +
        'bound to the Mcp-Session-Id the gateway issues); `shared` (stateless servers) runs one for ' +
        "all and scopes each client's request ids and notifications to its own calls.",
    },
    max_sessions: {
      ...ms(16),
      description:
        'Live client sessions allowed. When all are taken, an initialize from a client under its share ' +
        'ends the longest-idle session of the client holding the most (more than it holds); else 503.',
    },
    max_sessions_per_client: {
      type: 'integer',
      minimum: 1,
      description:
        'Live sessions one client may hold (503 beyond): the authenticated subject, else the client address ' +
        '(an IPv6 /64). Default: max(1, floor(max_sessions / 4)); at most max_sessions.',
    },
    session_idle_timeout_ms: {
      ...ms(300000, 100),
      description: 'A client session with no request for this long is ended (its child reaped).',
    },
    spare_sessions: {
      type: 'integer',
      minimum: 0,
      maximum: 8,
      default: 0,
      description: 'per-client: children kept started ahead of the next initialize (hides the start-up time).',
    },
  },
} as const;

const when = <K extends readonly string[], S>(kinds: K, then: S) =>
  ({
    if: { type: 'object', required: ['kind'], properties: { kind: { enum: kinds } } },
    then,
  }) as const;

/**
 * JSON Schema of one entry of `upstreams:`; `kind` selects the branch. The branches are
 * if/then rather than oneOf because ajv ignores (and in strict mode rejects) defaults inside oneOf.
 * The types below are inferred from each branch (if/then itself is not typed; the dispatch by
 * `kind` is what the union of the branches says).
 */
export const upstreamConfigSchema = {
  type: 'object',
  required: ['kind'],
  properties: { kind: { enum: ['http', 'jsonrpc', 'openai', 'stdio'] } },
  allOf: [
    when(plainHttpSchema.properties.kind.enum, plainHttpSchema),
    // A provider's key and model names are OpenAI-only: on an `http` upstream they are refused by name.
    when(['http'], { properties: { api_key_env: false, model_map: false } }),
    when(jsonrpcSchema.properties.kind.enum, jsonrpcSchema),
    when([stdioSchema.properties.kind.const], stdioSchema),
  ],
} as const;

/** An `http` or `openai` upstream as written (an `http` one without the provider's fields). */
export type PlainHttpUpstreamConfig = FromSchema<typeof plainHttpSchema, 'written'>;
export type JsonRpcUpstreamConfig = FromSchema<typeof jsonrpcSchema, 'written'>;
/** The upstreams reached over HTTP. */
export type HttpUpstreamConfig = PlainHttpUpstreamConfig | JsonRpcUpstreamConfig;
export type StdioUpstreamConfig = FromSchema<typeof stdioSchema, 'written'>;
export type UpstreamConfig = HttpUpstreamConfig | StdioUpstreamConfig;

export type RpcProtocol = FromSchema<typeof protocol>;
/** One of several endpoints (`weight`: relative share of the requests, default 1). */
export type EndpointConfig = NonNullable<HttpUpstreamConfig['endpoints']>[number];
/**
 * `round-robin`: smooth weighted rotation; `least-request`: the less busy of two random picks (by
 * weight); `consistent-hash`: a ring keyed by a request value (`hash_on`).
 */
export type BalanceMode = NonNullable<HttpUpstreamConfig['balance']>;
export type HashOn = NonNullable<HttpUpstreamConfig['hash_on']>;
/** Passive outlier ejection: what the answers of real requests say about an endpoint. */
export type OutlierConfig = NonNullable<HttpUpstreamConfig['outlier']>;
/** Retries (runtime/upstreams/retry.ts): where safe, on another endpoint when there is one, within a budget. */
export type RetryConfig = NonNullable<HttpUpstreamConfig['retry']>;

/**
 * What applies the defaults of one endpoint's pool and checks: the fields every HTTP kind shares
 * (those of the `jsonrpc` branch, the widest), no `required` and no `additionalProperties`, so
 * that it reads them out of any HTTP upstream's config. `health_check` defaults to `{}` here only
 * (its own defaults apply without one), not in the config schema: a config stays as written.
 */
const endpointSchema = {
  type: 'object',
  properties: {
    connect_timeout_ms: jsonrpcSchema.properties.connect_timeout_ms,
    timeout_ms: jsonrpcSchema.properties.timeout_ms,
    body_timeout_ms: jsonrpcSchema.properties.body_timeout_ms,
    connections: jsonrpcSchema.properties.connections,
    keep_alive_timeout_ms: jsonrpcSchema.properties.keep_alive_timeout_ms,
    health_check: { ...rpcHealthCheck, default: {} },
    protocol: jsonrpcSchema.properties.protocol,
  },
} as const;
type EndpointSettings = FromSchema<typeof endpointSchema>;

export type ResolvedHealthCheck = EndpointSettings['health_check'] & { timeout_ms: number };

export type ResolvedHttpConfig = Omit<EndpointSettings, 'health_check'> & {
  kind: HttpUpstreamConfig['kind'];
  url: string;
  health_check: ResolvedHealthCheck;
};

/** One endpoint's config (`url` given: the upstream's own, or one of its `endpoints`). */
export function httpDefaults(c: HttpUpstreamConfig & { url: string }): ResolvedHttpConfig {
  const s = withDefaults<EndpointSettings>(endpointSchema, c, `upstream (${c.kind})`);
  return {
    kind: c.kind,
    url: c.url,
    connect_timeout_ms: s.connect_timeout_ms,
    timeout_ms: s.timeout_ms,
    body_timeout_ms: s.body_timeout_ms,
    connections: s.connections,
    keep_alive_timeout_ms: s.keep_alive_timeout_ms,
    // A check's time defaults to the upstream's connect time (not a constant: not in the schema).
    health_check: { ...s.health_check, timeout_ms: s.health_check.timeout_ms ?? s.connect_timeout_ms },
    protocol: s.protocol,
  };
}

/** The balancing settings with their defaults (outlier's from the schema; `round-robin` unless said). */
const balancingSchema = {
  type: 'object',
  properties: { outlier: { ...balancingProperties.outlier, default: {} } },
} as const;

export interface ResolvedBalancing {
  balance: BalanceMode;
  hash_on?: HashOn;
  outlier: FromSchema<typeof balancingSchema>['outlier'];
}

export function balancingDefaults(c: HttpUpstreamConfig): ResolvedBalancing {
  const { outlier } = withDefaults<FromSchema<typeof balancingSchema>>(balancingSchema, c, `upstream (${c.kind})`);
  return {
    balance: c.balance ?? 'round-robin',
    ...(c.hash_on ? { hash_on: c.hash_on } : {}),
    outlier,
  };
}

/** The stdio branch with `restart` defaulting to `{}` (its delays' defaults apply without one). */
const stdioResolved = {
  ...stdioSchema,
  properties: { ...stdioSchema.properties, restart: { ...stdioSchema.properties.restart, default: {} } },
} as const;
type StdioSettings = FromSchema<typeof stdioResolved>;

export type ResolvedStdioConfig = Omit<
  StdioSettings,
  'args' | 'env' | 'inherit_env' | 'max_requests' | 'max_sessions_per_client'
> & {
  args: string[];
  env: Record<string, string>;
  inherit_env: string[];
  max_sessions_per_client: number;
  /** The child's whole environment (child-env.ts): base variables, `inherit_env`, then `env`. */
  environment: Record<string, string>;
};

/** `source`: the gateway's environment, of which the child gets only what child-env.ts lets through. */
export function stdioDefaults(c: StdioUpstreamConfig, source: NodeJS.ProcessEnv = process.env): ResolvedStdioConfig {
  const { max_requests: _, ...s } = withDefaults<StdioSettings>(stdioResolved, c, 'upstream (stdio)');
  return {
    ...s,
    args: s.args ?? [],
    env: s.env ?? {},
    inherit_env: s.inherit_env ?? [],
    environment: childEnvironment(s, source),
    // One client's share of `max_sessions`: as configured (at most all of them), else a quarter.
    max_sessions_per_client: Math.min(
      s.max_sessions_per_client ?? Math.max(1, Math.floor(s.max_sessions / 4)),
      s.max_sessions,
    ),
  };
}
