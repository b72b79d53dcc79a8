/**
 * Config of one entry of a service's `upstreams:` map (snake_case, as written in YAML), its JSON
 * Schema (used by config validation) and the defaults, applied here too so that an upstream built
 * from a hand-written object behaves like one built from a validated config.
 */
import { childEnvironment } from './child-env.ts';

export type RpcProtocol = 'mcp' | 'jsonrpc';

export interface HttpUpstreamConfig {
  kind: 'http' | 'jsonrpc' | 'openai';
  /** One endpoint; exclusive with `endpoints`. */
  url?: string;
  /** Several endpoints, balanced (runtime/upstreams/balanced.ts; jsonrpc: jsonrpc-balanced.ts). */
  endpoints?: EndpointConfig[];
  balance?: BalanceMode;
  /** `balance: consistent-hash`: the request value hashed (requests without it go round-robin). */
  hash_on?: HashOn;
  outlier?: OutlierConfig;
  retry?: RetryConfig;
  connect_timeout_ms?: number;
  /** Time allowed for the response headers. */
  timeout_ms?: number;
  /** Idle time allowed between body chunks; 0 disables it (long-lived SSE streams). */
  body_timeout_ms?: number;
  connections?: number;
  keep_alive_timeout_ms?: number;
  health_check?: HealthCheckConfig;
  /** Only for `jsonrpc`: `mcp` makes the gateway's own calls run the MCP session handshake. */
  protocol?: RpcProtocol;
  /** Circuit breaking (runtime/upstreams/circuit.ts): calls in flight until their answer's headers. */
  max_requests?: number;
  /** `http` / `openai`: requests holding a connection at once (runtime/upstreams/slots.ts). */
  max_active?: number;
  /** `http` / `openai`: requests waiting for one of those slots at most. */
  max_pending?: number;
  /** Only for `openai`: environment variable holding the provider's API key (sent as a Bearer token). */
  api_key_env?: string;
  /** Only for `openai`: the request's `model` renamed for this provider (client name → provider name). */
  model_map?: Record<string, string>;
}

export interface EndpointConfig {
  url: string;
  /** Relative share of the requests (default 1). */
  weight?: number;
}

/**
 * `round-robin`: smooth weighted rotation; `least-request`: the less busy of two random picks (by
 * weight); `consistent-hash`: a ring keyed by a request value (`hash_on`).
 */
export type BalanceMode = 'round-robin' | 'least-request' | 'consistent-hash';

export interface HashOn {
  /** A request header's value (e.g. a user or tenant id); case-insensitive name. */
  header: string;
}

/**
 * The active check of each endpoint (the background probe): a TCP connect by default, a GET of
 * `path`, or a JSON-RPC call of `jsonrpc_method` (e.g. `ping`; with `protocol: mcp` in a session
 * of the check's own). Down after `unhealthy_threshold` failures in a row, up again after
 * `healthy_threshold` passes in a row.
 */
export interface HealthCheckConfig {
  interval_ms?: number;
  path?: string;
  jsonrpc_method?: string;
  /** Time allowed for one check (default: the upstream's connect_timeout_ms). */
  timeout_ms?: number;
  unhealthy_threshold?: number;
  healthy_threshold?: number;
  /** `path` checks: the statuses that pass (default: any below 500). */
  expect_status?: number[];
}

export interface ResolvedHealthCheck {
  interval_ms: number;
  path?: string;
  jsonrpc_method?: string;
  timeout_ms: number;
  unhealthy_threshold: number;
  healthy_threshold: number;
  expect_status?: number[];
}

/** Passive outlier ejection: what the answers of real requests say about an endpoint. */
export interface OutlierConfig {
  /** Failures in a row (connect failure, timeout, 5xx answer) that eject the endpoint. */
  consecutive_failures?: number;
  /** The first ejection's length; each further one of the same endpoint doubles it. */
  base_ejection_ms?: number;
  max_ejection_ms?: number;
  /** Share of the endpoints that may be ejected at once (at least one always serves). */
  max_ejected_share?: number;
}

/** Retries (runtime/upstreams/retry.ts): where safe, on another endpoint when there is one, within a budget. */
export interface RetryConfig {
  /** Tries in all, the first included (1: no retry). */
  attempts?: number;
  /** What is retried: `connect_failure` (default), `reset`, `timeout`, and answer statuses (400-599). */
  on?: Array<'connect_failure' | 'reset' | 'timeout' | number>;
  /** Full-jitter exponential backoff: a retry waits uniform [0, min(max_ms, base_ms·2^(n-1))]. */
  backoff?: { base_ms?: number; max_ms?: number };
  /** A longer `Retry-After` ends the retries (the answer goes to the client). */
  max_retry_after_ms?: number;
  /** Time allowed for each try's response headers (the whole request stays within `timeout_ms`). */
  per_try_timeout_ms?: number;
  /** Retries under way at most: max(min_concurrency, percent% of the live requests). */
  budget?: { percent?: number; min_concurrency?: number };
}

export interface ResolvedBalancing {
  balance: BalanceMode;
  hash_on?: HashOn;
  outlier: Required<OutlierConfig>;
}

export function balancingDefaults(c: HttpUpstreamConfig): ResolvedBalancing {
  return {
    balance: c.balance ?? 'round-robin',
    ...(c.hash_on ? { hash_on: c.hash_on } : {}),
    outlier: {
      consecutive_failures: c.outlier?.consecutive_failures ?? 5,
      base_ejection_ms: c.outlier?.base_ejection_ms ?? 30000,
      max_ejection_ms: c.outlier?.max_ejection_ms ?? 300000,
      max_ejected_share: c.outlier?.max_ejected_share ?? 0.5,
    },
  };
}

export interface StdioUpstreamConfig {
  kind: 'stdio';
  command: string;
  args?: string[];
  /** Variables set in the child's environment (child-env.ts). */
  env?: Record<string, string>;
  /** Variables of the gateway's environment the child gets besides the base ones (names, or `PREFIX*`). */
  inherit_env?: string[];
  cwd?: string;
  restart?: { initial_delay_ms?: number; max_delay_ms?: number };
  protocol?: RpcProtocol;
  call_timeout_ms?: number;
  /** MCP only: `per-client` (default) runs one child per client session; `shared` one for all. */
  sessions?: 'per-client' | 'shared';
  /** Cap on live client sessions (per-client: children besides the gateway's own). */
  max_sessions?: number;
  /**
   * Cap on the live sessions of one client (its authenticated subject, else its address); default
   * max(1, floor(max_sessions / 4)), at most max_sessions.
   */
  max_sessions_per_client?: number;
  /** A client session with no request for this long is ended (its child reaped). */
  session_idle_timeout_ms?: number;
  /** per-client: children started ahead of the next initialize, so a session's start is not waited for. */
  spare_sessions?: number;
}

export type UpstreamConfig = HttpUpstreamConfig | StdioUpstreamConfig;

export type ResolvedHttpConfig = Required<
  Omit<
    HttpUpstreamConfig,
    | 'health_check'
    | 'endpoints'
    | 'balance'
    | 'hash_on'
    | 'outlier'
    | 'retry'
    | 'max_requests'
    | 'max_active'
    | 'max_pending'
    | 'api_key_env'
    | 'model_map'
  >
> & {
  health_check: ResolvedHealthCheck;
};

export type ResolvedStdioConfig = Required<Omit<StdioUpstreamConfig, 'restart' | 'cwd'>> & {
  cwd?: string;
  restart: { initial_delay_ms: number; max_delay_ms: number };
  /** The child's whole environment (child-env.ts): base variables, `inherit_env`, then `env`. */
  environment: Record<string, string>;
};

/** One endpoint's config (`url` given: the upstream's own, or one of its `endpoints`). */
export function httpDefaults(c: HttpUpstreamConfig & { url: string }): ResolvedHttpConfig {
  return {
    kind: c.kind,
    url: c.url,
    connect_timeout_ms: c.connect_timeout_ms ?? 5000,
    timeout_ms: c.timeout_ms ?? 30000,
    body_timeout_ms: c.body_timeout_ms ?? 0,
    connections: c.connections ?? 64,
    keep_alive_timeout_ms: c.keep_alive_timeout_ms ?? 60000,
    health_check: healthCheckDefaults(c),
    protocol: c.protocol ?? 'jsonrpc',
  };
}

function healthCheckDefaults(c: HttpUpstreamConfig): ResolvedHealthCheck {
  const h = c.health_check ?? {};
  return {
    interval_ms: h.interval_ms ?? 2000,
    ...(h.path !== undefined ? { path: h.path } : {}),
    ...(h.jsonrpc_method !== undefined ? { jsonrpc_method: h.jsonrpc_method } : {}),
    timeout_ms: h.timeout_ms ?? c.connect_timeout_ms ?? 5000,
    unhealthy_threshold: h.unhealthy_threshold ?? 1,
    healthy_threshold: h.healthy_threshold ?? 1,
    ...(h.expect_status ? { expect_status: h.expect_status } : {}),
  };
}

/** `source`: the gateway's environment, of which the child gets only what child-env.ts lets through. */
export function stdioDefaults(c: StdioUpstreamConfig, source: NodeJS.ProcessEnv = process.env): ResolvedStdioConfig {
  return {
    kind: 'stdio',
    command: c.command,
    args: c.args ?? [],
    env: c.env ?? {},
    inherit_env: c.inherit_env ?? [],
    environment: childEnvironment(c, source),
    cwd: c.cwd,
    restart: { initial_delay_ms: c.restart?.initial_delay_ms ?? 200, max_delay_ms: c.restart?.max_delay_ms ?? 10000 },
    protocol: c.protocol ?? 'mcp',
    call_timeout_ms: c.call_timeout_ms ?? 30000,
    sessions: c.sessions ?? 'per-client',
    max_sessions: c.max_sessions ?? 16,
    max_sessions_per_client: sessionsPerClient(c),
    session_idle_timeout_ms: c.session_idle_timeout_ms ?? 300_000,
    spare_sessions: c.spare_sessions ?? 0,
  };
}

/** One client's share of `max_sessions`: as configured (at most all of them), else a quarter. */
function sessionsPerClient(c: StdioUpstreamConfig): number {
  const max = c.max_sessions ?? 16;
  return Math.min(c.max_sessions_per_client ?? Math.max(1, Math.floor(max / 4)), max);
}

const ms = (def: number, min = 1) => ({ type: 'integer', minimum: min, default: def });

const urlSchema = {
  type: 'string',
  pattern: '^https?://',
  description: 'Base URL; request paths are appended to its path.',
};

const share = { type: 'number', exclusiveMinimum: 0, maximum: 1 };

/** Several endpoints and how they are balanced; no schema defaults here, so a single-`url` config stays as written. */
const balancingProperties = {
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
};

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
};

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
};

/**
 * `http` / `openai` upstreams (`plain`) also take `retry:` with a single `url` and the slot bounds
 * (`max_active`, `max_pending`); a `jsonrpc` one takes `retry:` only with `endpoints` (its calls
 * go through the balancer then) and no slot bounds, so neither is accepted and silently unused.
 */
const httpSchema = (kinds: string[], withProtocol: boolean, balanced: boolean, plain = !withProtocol) => ({
  type: 'object',
  additionalProperties: false,
  required: ['kind'],
  // Exactly one of `url` and `endpoints`: with endpoints a url is refused by name, without them it is required.
  ...(balanced
    ? {
        if: { properties: { endpoints: true }, required: ['endpoints'] },
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: { properties: { url: false } },
        else: { properties: { url: true }, required: ['url'] },
        dependentRequired: {
          balance: ['endpoints'],
          hash_on: ['endpoints', 'balance'],
          outlier: ['endpoints'],
          ...(plain ? {} : { retry: ['endpoints'] }),
        },
        // A hash needs its key; a key without the hash would be silently unused.
        allOf: [
          {
            if: { properties: { balance: { const: 'consistent-hash' } }, required: ['balance'] },
            // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
            then: { properties: { hash_on: true }, required: ['hash_on'] },
            else: { properties: { hash_on: false } },
          },
        ],
      }
    : { required: ['kind', 'url'] }),
  properties: {
    kind: { enum: kinds },
    url: urlSchema,
    ...(balanced ? balancingProperties : {}),
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
    ...(balanced && plain ? slotProperties : {}),
    keep_alive_timeout_ms: ms(60000),
    health_check: {
      type: 'object',
      additionalProperties: false,
      // One kind of check: a path and a method together would leave one silently unused.
      ...(withProtocol ? { dependentSchemas: { path: { properties: { jsonrpc_method: false } } } } : {}),
      properties: {
        interval_ms: ms(2000, 100),
        path: {
          type: 'string',
          pattern: '^/',
          description: 'GET this path (passes below 500, or on `expect_status`); default: a TCP connect.',
        },
        ...(withProtocol
          ? {
              jsonrpc_method: {
                type: 'string',
                minLength: 1,
                description:
                  'POST this JSON-RPC method (e.g. `ping`; with `protocol: mcp` in a session of its own); ' +
                  'passes on a result. Exclusive with `path`.',
              },
            }
          : {}),
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
      },
    },
    ...(withProtocol ? { protocol: { enum: ['mcp', 'jsonrpc'], default: 'jsonrpc' } } : {}),
    ...(kinds.includes('openai') ? providerProperties : {}),
  },
});

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
};

const when = (kinds: string[], then: Record<string, unknown>) => ({
  if: { type: 'object', required: ['kind'], properties: { kind: { enum: kinds } } },
  then,
});

/**
 * JSON Schema of one entry of `upstreams:`; `kind` selects the branch. The branches are
 * if/then rather than oneOf because ajv ignores (and in strict mode rejects) defaults inside oneOf.
 */
export const upstreamConfigSchema = {
  type: 'object',
  required: ['kind'],
  properties: { kind: { enum: ['http', 'jsonrpc', 'openai', 'stdio'] } },
  allOf: [
    when(['http', 'openai'], httpSchema(['http', 'openai'], false, true)),
    // A provider's key and model names are OpenAI-only: on an `http` upstream they are refused by name.
    when(['http'], { properties: { api_key_env: false, model_map: false } }),
    // Balanced too: an MCP session sticks to the endpoint that issued it (jsonrpc-balanced.ts).
    when(['jsonrpc'], httpSchema(['jsonrpc'], true, true)),
    when(['stdio'], stdioSchema),
  ],
};
