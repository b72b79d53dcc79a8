/** The shape of a validated service config (defaults applied). */
import type { OnUninspectable } from '../answer/guard.ts';
import type { Mode } from '../mode.ts';
import type { TracingConfig } from '../observability/tracing.ts';
import type { OnError } from '../service/pipeline.ts';

export interface ListenerConfig {
  host: string;
  port: number;
}

/** The main listener: optionally HTTPS (empty paths mean plain HTTP). */
export interface MainListenerConfig extends ListenerConfig {
  tls?: { cert: string; key: string };
}

export interface StageConfig {
  plugin: string;
  options: Record<string, unknown>;
  onError: OnError;
  /** What the stage does with an answer it must read but cannot (runtime/answer/guard.ts). */
  onUninspectable: OnUninspectable;
  /** Path of the stage in the config file, for error messages. */
  path: Array<string | number>;
}

export interface RouteConfig {
  id: string;
  methods: string[];
  path: string;
  dialect?: string;
  mode?: Mode;
  pipeline: StageConfig[];
}

export interface ServiceConfig {
  service: string;
  version: string;
  description?: string;
  listen: MainListenerConfig;
  metrics?: ListenerConfig & { path: string; enabled?: boolean };
  admin?: ListenerConfig & { token?: string };
  /** Host and Origin names the listeners accept (runtime/server/host-check.ts). */
  hosts: { allow: string[]; origins: string[] };
  dialect: string;
  mode?: Mode;
  request_id_header: string;
  trust_proxy: boolean;
  limits: {
    body_bytes: number;
    answer_bytes: number;
    json_depth: number;
    max_concurrent: number;
    keep_alive_timeout_ms: number;
    drain_timeout_ms: number;
    max_connections: number;
    max_connections_per_client: number;
    /** Fraction of max_connections from which max_connections_per_client applies. */
    connections_high_water: number;
    /** Near max_connections, headers not complete after this long: the connection may be closed to make room. */
    slow_header_ms: number;
    header_timeout_ms: number;
    body_idle_timeout_ms: number;
    max_upgraded_connections: number;
    idle_trim_ms: number;
    idle_trim_growth_mb: number;
  };
  logging: {
    level: string;
    format: 'auto' | 'json' | 'pretty' | 'compact';
    file?: string;
    /** Rotate `file` at this size in MiB; 0: no rotation. */
    max_size_mb: number;
    /** Rotated files kept besides the current one. */
    max_files: number;
    access_log: boolean;
  };
  /** OpenTelemetry tracing (runtime/observability/tracing.ts); off unless enabled. */
  tracing?: TracingConfig;
  plugins?: string[];
  upstreams: Record<string, Record<string, unknown> & { kind: string }>;
  resources: Record<string, Record<string, unknown> & { type: string }>;
  /** Service-wide stages, then the auth / rate_limit shorthands, in front of every route. */
  pipeline: StageConfig[];
  routes: RouteConfig[];
}
