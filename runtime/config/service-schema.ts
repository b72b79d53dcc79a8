/**
 * JSON Schema of a service config file. Stage options are checked separately against each
 * plugin's own schema; `fullServiceSchema` merges them in for editors (schemas/service.schema.json).
 */

import { enforcementModes } from '../mode.ts';
import type { AnyDefinition, JsonSchema } from '../plugin.ts';
import { upstreamConfigSchema } from '../upstreams/create.ts';
import { editorSchema } from './editor-schema.ts';
import { listPaths } from './string-lists.ts';

const listener = {
  type: 'object',
  additionalProperties: false,
  required: ['port'],
  properties: {
    host: { type: 'string', default: '127.0.0.1', description: 'Address to bind; 0.0.0.0 for all interfaces.' },
    port: { type: 'integer', minimum: 0, maximum: 65535, description: '0 picks a free port.' },
  },
};

const onError = {
  enum: ['fail-closed', 'fail-open'],
  description: "What happens when the stage fails internally: 'fail-closed' answers 500, 'fail-open' skips it.",
};

const onUninspectable = {
  enum: ['refuse', 'pass'],
  // No schema default: unsaid, the plugin's declared default applies (runtime/config/load.ts), else refuse.
  description:
    "What happens when the stage must read the upstream's answer but cannot (undecodable, wrong content type, invalid or cut-short JSON, a stream without its end): 'refuse' answers 502 and records an `unchecked` decision; 'pass' lets it through unread, counted, marked (X-Answer-Unchecked) and recorded as `passed-unchecked`. Default: what the plugin declares (a pure observer declares pass), else refuse.",
};

/** A stage: a map with exactly one plugin name (its options as value), optional `on_error` and `on_uninspectable`. */
export const stageSchema: JsonSchema = {
  type: 'object',
  minProperties: 1,
  properties: { on_error: onError, on_uninspectable: onUninspectable },
  additionalProperties: { type: ['object', 'null'] },
};

export const dialectNames = ['simple', 'jsonrpc', 'openai', 'plain', 'fastapi'];

export function serviceSchema(stage: JsonSchema = stageSchema): JsonSchema {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'https://switchyard.dev/schemas/service.schema.json',
    title: 'Switchyard service',
    description: 'One service: listeners, upstreams, shared resources and routes with their pipelines of stages.',
    type: 'object',
    additionalProperties: false,
    required: ['service', 'listen', 'routes'],
    properties: {
      $schema: { type: 'string' },
      service: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]*$', description: 'Service name (metrics, logs).' },
      version: { type: 'string', default: '0.1.0', description: 'Reported by health endpoints.' },
      description: { type: 'string' },
      settings: {
        type: 'object',
        description:
          'Only in the template of a settings file: a JSON Schema of the settings it takes (types, defaults, no unknown keys).',
      },
      hosts: {
        type: 'object',
        additionalProperties: false,
        default: {},
        description:
          'DNS rebinding and cross-site protection: the Host and Origin values the main and admin listeners accept (see docs/configuration.md). Loopback names and IP addresses are always accepted as Host.',
        properties: {
          allow: {
            type: 'array',
            items: { type: 'string', pattern: '^(\\*|[A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])$' },
            default: [],
            description:
              'Host names (any port) accepted besides loopback names and IP addresses, e.g. api.example.com; "*" accepts any Host.',
          },
          origins: {
            type: 'array',
            items: { type: 'string', pattern: '^(\\*|https?://[^/]+)$' },
            default: [],
            description:
              'Origins (scheme://host[:port]) accepted besides loopback pages and the request\'s own origin; "*" accepts any Origin.',
          },
        },
      },
      listen: {
        ...listener,
        description: 'The main listener.',
        properties: {
          ...listener.properties,
          tls: {
            type: 'object',
            additionalProperties: false,
            description:
              'Serve HTTPS: PEM certificate chain and private key files (relative to this file). Both empty: plain HTTP.',
            properties: {
              cert: { type: 'string', default: '', description: 'Certificate chain (PEM) file.' },
              key: { type: 'string', default: '', description: 'Private key (PEM) file.' },
            },
          },
        },
      },
      metrics: {
        type: 'object',
        additionalProperties: false,
        required: ['port'],
        properties: {
          ...listener.properties,
          path: { type: 'string', default: '/metrics' },
          enabled: {
            type: 'boolean',
            default: true,
            description: 'false: no metrics listener (metrics are still counted, e.g. for the admin endpoints).',
          },
        },
      },
      admin: {
        type: 'object',
        additionalProperties: false,
        required: ['port'],
        properties: {
          ...listener.properties,
          token: { type: 'string', description: 'When set, admin calls need `Authorization: Bearer <token>`.' },
        },
      },
      dialect: { enum: dialectNames, default: 'simple', description: 'How errors are written.' },
      mode: {
        enum: [...enforcementModes],
        description: 'Default enforcement mode of the routes. Unset: permissive.',
      },
      request_id_header: { type: 'string', default: 'X-Request-Id' },
      trust_proxy: {
        type: 'boolean',
        default: false,
        description: 'Trust X-Forwarded-For for the client address (only behind your own load balancer).',
      },
      limits: {
        type: 'object',
        additionalProperties: false,
        default: {},
        properties: {
          body_bytes: { type: 'integer', minimum: 1, default: 1048576 },
          answer_bytes: {
            type: 'integer',
            minimum: 1,
            default: 16777216,
            description:
              "The most of an upstream's answer a stage reads to check it (a whole body after decoding, or one event of a stream); a larger one cannot be checked and is refused unless the stage says `on_uninspectable: pass`.",
          },
          json_depth: { type: 'integer', minimum: 1, default: 64 },
          max_concurrent: { type: 'integer', minimum: 1, default: 1024 },
          keep_alive_timeout_ms: {
            type: 'integer',
            minimum: 1000,
            default: 65000,
            description: 'Idle keep-alive on client connections; above common load-balancer idle timeouts (60 s).',
          },
          drain_timeout_ms: { type: 'integer', minimum: 0, default: 30000 },
          max_connections: {
            type: 'integer',
            minimum: 1,
            default: 1024,
            description:
              'Client connections open at once on the main listener. Near it, idle keep-alive connections and connections that have not completed their request headers within slow_header_ms are closed, oldest first, to make room; at it, an address holding at least two more connections than the address of the newcomer gives up one that has not sent its headers yet; past that a new connection is refused with 503 and Retry-After (up to max_connections / 8 such refusals at once, further ones are closed at once).',
          },
          max_connections_per_client: {
            type: 'integer',
            minimum: 1,
            default: 64,
            description:
              "A client address's share of the main listener's connections, applied only under pressure: while the open connections are at or above connections_high_water × max_connections, a new connection from an address holding this many is refused with 503 and Retry-After. Below that mark a client may open as many as it likes (one app server's pool, clients behind one NAT). Behind your own load balancer every client has its address: raise it to max_connections.",
          },
          connections_high_water: {
            type: 'number',
            exclusiveMinimum: 0,
            maximum: 1,
            default: 0.75,
            description:
              'Where "near max_connections" starts: from this fraction of max_connections open (rounded up), max_connections_per_client applies. 1: only at max_connections itself.',
          },
          slow_header_ms: {
            type: 'integer',
            minimum: 10,
            default: 1000,
            description:
              'Near max_connections, a connection that has not completed its request headers this long after connecting is closed (oldest first) to make room for a new one, as idle keep-alives are, so a slowloris cannot hold slots until header_timeout_ms. Also how long a connection being refused with 503 has to send its request.',
          },
          header_timeout_ms: {
            type: 'integer',
            minimum: 100,
            default: 10000,
            description:
              "Time a client has to send a request's headers (from connecting, or from a later request's first byte); then 408 and the connection closed.",
          },
          body_idle_timeout_ms: {
            type: 'integer',
            minimum: 100,
            default: 15000,
            description:
              'A request body that stops arriving (no byte for this long while the service waits for it) has its connection cut. A slow but steady upload is never cut, nor a long answer.',
          },
          max_upgraded_connections: {
            type: 'integer',
            minimum: 1,
            default: 256,
            description:
              'Upgraded connections (WebSockets) open at once on the main listener; more are refused with 503.',
          },
          idle_trim_ms: {
            type: 'integer',
            minimum: 0,
            default: 10000,
            description:
              'After this long without a request, a service whose resident memory grew by idle_trim_growth_mb (over its lowest idle level since it started or last trimmed) asks V8 for a garbage collection and its worker threads to collect, so that the memory of a burst is returned; 0: never.',
          },
          idle_trim_growth_mb: {
            type: 'integer',
            minimum: 1,
            default: 32,
            description: 'Growth of resident memory (MiB) that makes an idle trim worthwhile.',
          },
        },
      },
      tracing: {
        type: 'object',
        additionalProperties: false,
        description:
          'OpenTelemetry tracing: spans per request, stage and upstream call, exported over OTLP/HTTP (JSON). ' +
          'Off by default; OTEL_SDK_DISABLED=true turns it off whatever the file says.',
        properties: {
          enabled: { type: 'boolean', default: false },
          endpoint: {
            type: 'string',
            description:
              'OTLP/HTTP collector URL (`/v1/traces` appended unless present). Unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, ' +
              'else OTEL_EXPORTER_OTLP_ENDPOINT, else http://127.0.0.1:4318.',
          },
          sample_ratio: {
            type: 'number',
            minimum: 0,
            maximum: 1,
            description:
              "Share of new traces recorded (a caller's sampled traceparent is always followed). Unset: OTEL_TRACES_SAMPLER_ARG, else 1.",
          },
          service_name: {
            type: 'string',
            description: 'service.name of the spans. Unset: OTEL_SERVICE_NAME, else `service`.',
          },
          export_delay_ms: {
            type: 'integer',
            minimum: 1,
            description:
              'How long finished spans wait to be exported in a batch. Unset: OTEL_BSP_SCHEDULE_DELAY, else 5000.',
          },
        },
      },
      logging: {
        type: 'object',
        additionalProperties: false,
        default: {},
        properties: {
          level: { enum: ['trace', 'debug', 'info', 'warn', 'error', 'silent'], default: 'info' },
          format: {
            enum: ['auto', 'json', 'pretty', 'compact'],
            default: 'auto',
            description:
              'auto: pretty on a terminal, json otherwise (a pipe, a file, a container); pretty and compact: one line a record. ' +
              'LOG_FORMAT, when set, wins for every service of the process.',
          },
          file: {
            type: 'string',
            description: 'Write logs to this file (relative to this file) instead of stdout; empty: stdout.',
          },
          max_size_mb: {
            type: 'number',
            minimum: 0,
            default: 0,
            description: 'Rotate `file` when it reaches this size (MiB); 0: no rotation.',
          },
          max_files: {
            type: 'integer',
            minimum: 1,
            default: 5,
            description: 'Rotated files kept (`<file>.1` newest … `<file>.<max_files>`), besides the current one.',
          },
          access_log: { type: 'boolean', default: true },
        },
      },
      auth: {
        type: 'object',
        description: 'Shorthand for an `auth` stage in front of every route.',
        properties: { enabled: { type: 'boolean', default: false } },
      },
      rate_limit: {
        type: 'object',
        description: 'Shorthand for a `rate-limit` stage in front of every route.',
        properties: { enabled: { type: 'boolean', default: false } },
      },
      plugins: { type: 'array', items: { type: 'string' }, description: 'npm packages providing more plugins.' },
      upstreams: { type: 'object', additionalProperties: upstreamConfigSchema, default: {} },
      resources: {
        type: 'object',
        default: {},
        additionalProperties: { type: 'object', required: ['type'], properties: { type: { type: 'string' } } },
      },
      pipeline: { type: 'array', items: stage, default: [], description: 'Stages run before every route.' },
      routes: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['match', 'pipeline'],
          properties: {
            id: { type: 'string' },
            match: {
              type: 'object',
              additionalProperties: false,
              required: ['path'],
              properties: {
                method: {
                  oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }],
                  default: 'GET',
                },
                path: { type: 'string', pattern: '^/', description: 'Path pattern, `:name` for params.' },
              },
            },
            dialect: { enum: dialectNames },
            mode: {
              enum: [...enforcementModes],
              description: "Enforcement mode of this route (default: the service's).",
            },
            pipeline: { type: 'array', items: stage, minItems: 1 },
          },
        },
      },
    },
  };
}

/** The service schema with every known plugin's options spelled out, for editor completion. */
export function fullServiceSchema(definitions: AnyDefinition[]): JsonSchema {
  const stages = definitions
    .filter((d) => d.kind === 'stage')
    .map((d) => ({
      type: 'object',
      description: d.description,
      additionalProperties: false,
      required: [d.name],
      properties: { [d.name]: d.options, on_error: onError, on_uninspectable: onUninspectable },
    }));
  const schema = serviceSchema({ anyOf: stages });
  const resources = definitions
    .filter((d) => d.kind === 'resource')
    .map((d) => {
      const options = d.options as { properties?: object; required?: string[] };
      return {
        ...d.options,
        description: d.description,
        required: ['type', ...(options.required ?? [])],
        properties: { type: { const: d.type }, ...options.properties },
      };
    });
  (schema.properties as Record<string, JsonSchema>).resources = {
    type: 'object',
    additionalProperties: { anyOf: resources },
  };
  return editorSchema(schema, listPaths) as JsonSchema;
}
