/**
 * Config of one entry of a service's `upstreams:` map (snake_case, as written in YAML), its JSON
 * Schema (used by config validation) and the defaults, applied here too so that an upstream built
 * from a hand-written object behaves like one built from a validated config.
 */

export type RpcProtocol = 'mcp' | 'jsonrpc';

export interface HttpUpstreamConfig {
  kind: 'http' | 'jsonrpc' | 'openai';
  url: string;
  connect_timeout_ms?: number;
  /** Time allowed for the response headers. */
  timeout_ms?: number;
  /** Idle time allowed between body chunks; 0 disables it (long-lived SSE streams). */
  body_timeout_ms?: number;
  connections?: number;
  keep_alive_timeout_ms?: number;
  health_check?: { interval_ms?: number; path?: string };
  /** Only for `jsonrpc`: `mcp` makes the gateway's own calls run the MCP session handshake. */
  protocol?: RpcProtocol;
}

export interface StdioUpstreamConfig {
  kind: 'stdio';
  command: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  restart?: { initial_delay_ms?: number; max_delay_ms?: number };
  protocol?: RpcProtocol;
  call_timeout_ms?: number;
  /** MCP only: `per-client` (default) runs one child per client session; `shared` one for all. */
  sessions?: 'per-client' | 'shared';
  /** Cap on live client sessions (per-client: children besides the gateway's own). */
  max_sessions?: number;
  /** A client session with no request for this long is ended (its child reaped). */
  session_idle_timeout_ms?: number;
  /** per-client: children started ahead of the next initialize, so a session's start is not waited for. */
  spare_sessions?: number;
}

export type UpstreamConfig = HttpUpstreamConfig | StdioUpstreamConfig;

export type ResolvedHttpConfig = Required<Omit<HttpUpstreamConfig, 'health_check'>> & {
  health_check: { interval_ms: number; path?: string };
};

export type ResolvedStdioConfig = Required<Omit<StdioUpstreamConfig, 'restart' | 'cwd'>> & {
  cwd?: string;
  restart: { initial_delay_ms: number; max_delay_ms: number };
};

export function httpDefaults(c: HttpUpstreamConfig): ResolvedHttpConfig {
  return {
    kind: c.kind,
    url: c.url,
    connect_timeout_ms: c.connect_timeout_ms ?? 5000,
    timeout_ms: c.timeout_ms ?? 30000,
    body_timeout_ms: c.body_timeout_ms ?? 0,
    connections: c.connections ?? 64,
    keep_alive_timeout_ms: c.keep_alive_timeout_ms ?? 60000,
    health_check: { interval_ms: c.health_check?.interval_ms ?? 2000, path: c.health_check?.path },
    protocol: c.protocol ?? 'jsonrpc',
  };
}

export function stdioDefaults(c: StdioUpstreamConfig): ResolvedStdioConfig {
  return {
    kind: 'stdio',
    command: c.command,
    args: c.args ?? [],
    env: c.env ?? {},
    cwd: c.cwd,
    restart: { initial_delay_ms: c.restart?.initial_delay_ms ?? 200, max_delay_ms: c.restart?.max_delay_ms ?? 10000 },
    protocol: c.protocol ?? 'mcp',
    call_timeout_ms: c.call_timeout_ms ?? 30000,
    sessions: c.sessions ?? 'per-client',
    max_sessions: c.max_sessions ?? 16,
    session_idle_timeout_ms: c.session_idle_timeout_ms ?? 300_000,
    spare_sessions: c.spare_sessions ?? 0,
  };
}

const ms = (def: number, min = 1) => ({ type: 'integer', minimum: min, default: def });

const httpSchema = (kinds: string[], withProtocol: boolean) => ({
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'url'],
  properties: {
    kind: { enum: kinds },
    url: { type: 'string', pattern: '^https?://', description: 'Base URL; request paths are appended to its path.' },
    connect_timeout_ms: ms(5000),
    timeout_ms: { ...ms(30000), description: 'Time allowed for the response headers (504 after it).' },
    body_timeout_ms: { ...ms(0, 0), description: 'Idle time allowed between body chunks; 0 = none (SSE).' },
    connections: { ...ms(64), description: 'Connection pool size.' },
    keep_alive_timeout_ms: ms(60000),
    health_check: {
      type: 'object',
      additionalProperties: false,
      properties: {
        interval_ms: ms(2000, 100),
        path: { type: 'string', description: 'GET this path (healthy when < 500); default: a TCP connect.' },
      },
    },
    ...(withProtocol ? { protocol: { enum: ['mcp', 'jsonrpc'], default: 'jsonrpc' } } : {}),
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
    env: { type: 'object', additionalProperties: { type: 'string' } },
    cwd: { type: 'string', description: "Resolved against the config file's directory." },
    restart: {
      type: 'object',
      additionalProperties: false,
      properties: { initial_delay_ms: ms(200), max_delay_ms: ms(10000) },
    },
    protocol: { enum: ['mcp', 'jsonrpc'], default: 'mcp' },
    call_timeout_ms: ms(30000),
    sessions: {
      enum: ['per-client', 'shared'],
      default: 'per-client',
      description:
        'MCP client sessions: `per-client` runs one child per session (spawned at initialize, ' +
        'bound to the Mcp-Session-Id the gateway issues); `shared` (stateless servers) runs one for ' +
        "all and scopes each client's request ids and notifications to its own calls.",
    },
    max_sessions: { ...ms(16), description: 'Live client sessions allowed (503 beyond).' },
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
    when(['http', 'openai'], httpSchema(['http', 'openai'], false)),
    when(['jsonrpc'], httpSchema(['jsonrpc'], true)),
    when(['stdio'], stdioSchema),
  ],
};
