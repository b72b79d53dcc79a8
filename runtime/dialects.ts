/**
 * Error dialects: how a service writes a GatewayError on the wire. Stages never build error
 * bodies themselves; they throw a GatewayError and the route's dialect renders it.
 */
import { defaultStatus, type ErrorKind, type GatewayError } from './errors.ts';

export interface RenderedError {
  status: number;
  body: unknown;
}

export interface Dialect {
  name: string;
  /** `rpcId` is the id of the JSON-RPC request being answered, when there is one. */
  render(err: GatewayError, rpcId?: string | number | null): RenderedError;
}

/** `{error, message, details}`: the REST dialect of the typed proxy and registry API. */
export const simpleDialect: Dialect = {
  name: 'simple',
  render(err) {
    const code = err.code ?? simpleCode[err.kind];
    return {
      status: err.status ?? defaultStatus[err.kind],
      body: { error: code, message: err.message, details: err.details ?? {}, ...err.extra },
    };
  },
};

const simpleCode: Record<ErrorKind, string> = {
  bad_request: 'bad_request',
  parse_error: 'bad_request',
  invalid_rpc: 'bad_request',
  unauthorized: 'unauthorized',
  forbidden: 'forbidden',
  policy_violation: 'policy_violation',
  not_found: 'not_found',
  method_not_allowed: 'method_not_allowed',
  conflict: 'conflict',
  payload_too_large: 'payload_too_large',
  unsupported_media_type: 'unsupported_media_type',
  validation_failed: 'validation_failed',
  qom_failed: 'validation_failed',
  rate_limited: 'rate_limited',
  overloaded: 'overloaded',
  internal_error: 'internal_error',
  upstream_error: 'upstream_error',
  upstream_invalid: 'upstream_error',
  upstream_timeout: 'upstream_timeout',
  unavailable: 'unavailable',
};

/**
 * JSON-RPC 2.0 error objects for message-level failures (parse, invalid request, schema, QoM,
 * policy). Transport-level failures (auth, rate limit, size, upstream) keep the
 * `{error, message, details}` body, as the typed-proxy seed lists them in its REST error table.
 */
export const jsonRpcDialect: Dialect = {
  name: 'jsonrpc',
  render(err, rpcId) {
    const rpc =
      rpcErrors[err.kind] ??
      (err.rpcCode === undefined ? undefined : { code: err.rpcCode, status: defaultStatus[err.kind] });
    if (!rpc) return simpleDialect.render(err);
    return {
      status: err.status ?? rpc.status,
      body: {
        jsonrpc: '2.0',
        id: rpcId ?? null,
        error: {
          code: rpc.code,
          message: rpc.message ?? err.message,
          // The fixed JSON-RPC message names the class; the reason goes in data.
          data: {
            ...(rpc.message && rpc.message !== err.message ? { reason: err.message } : {}),
            ...err.details,
            ...err.extra,
          },
        },
      },
    };
  },
};

const rpcErrors: Partial<Record<ErrorKind, { code: number; status: number; message?: string }>> = {
  parse_error: { code: -32700, status: 400, message: 'Parse error' },
  invalid_rpc: { code: -32600, status: 400, message: 'Invalid Request' },
  validation_failed: { code: -32602, status: 422, message: 'Schema validation failed' },
  qom_failed: { code: -32602, status: 422, message: 'QoM threshold not met' },
  policy_violation: { code: -32603, status: 403, message: 'Policy violation' },
  // An answer the gateway could not check is refused as a JSON-RPC error, so that a client waiting
  // for the response to its request gets one (with the request's id).
  upstream_invalid: { code: -32603, status: 502, message: 'Upstream error' },
};

/** OpenAI-style `{error: {message, type, code, details}}`. */
export const openAiDialect: Dialect = {
  name: 'openai',
  render(err) {
    const mapped = openAiTypes[err.kind];
    return {
      status: err.status ?? mapped.status ?? defaultStatus[err.kind],
      body: {
        error: {
          message: err.message,
          type: mapped.type,
          code: err.code ?? null,
          details: err.details ?? {},
          ...err.extra,
        },
      },
    };
  },
};

const openAiTypes: Record<ErrorKind, { type: string; status?: number }> = {
  bad_request: { type: 'invalid_request' },
  parse_error: { type: 'invalid_request' },
  invalid_rpc: { type: 'invalid_request' },
  unauthorized: { type: 'authentication_error' },
  forbidden: { type: 'permission_error' },
  policy_violation: { type: 'safety_violation', status: 400 },
  not_found: { type: 'not_found' },
  method_not_allowed: { type: 'invalid_request' },
  conflict: { type: 'invalid_request' },
  payload_too_large: { type: 'invalid_request' },
  unsupported_media_type: { type: 'invalid_request' },
  validation_failed: { type: 'invalid_request', status: 400 },
  qom_failed: { type: 'invalid_request', status: 400 },
  rate_limited: { type: 'rate_limit_exceeded' },
  overloaded: { type: 'overloaded' },
  internal_error: { type: 'internal_error' },
  upstream_error: { type: 'backend_error' },
  upstream_invalid: { type: 'backend_error' },
  upstream_timeout: { type: 'backend_error', status: 502 },
  unavailable: { type: 'internal_error' },
};

/** Plain `{error: "<message>"}`, as the embedding and search services use. */
export const plainDialect: Dialect = {
  name: 'plain',
  render(err) {
    return { status: err.status ?? defaultStatus[err.kind], body: { error: err.message, ...err.extra } };
  },
};

/**
 * FastAPI's `{"detail": ...}`: the list of validation issues (`details.errors`, each
 * `{type, loc, msg}`) for a validation error, the message for anything else.
 */
export const fastApiDialect: Dialect = {
  name: 'fastapi',
  render(err) {
    const errors = err.details?.errors;
    return {
      status: err.status ?? defaultStatus[err.kind],
      body: { detail: Array.isArray(errors) ? errors : err.message, ...err.extra },
    };
  },
};

export const dialects: Record<string, Dialect> = {
  simple: simpleDialect,
  jsonrpc: jsonRpcDialect,
  openai: openAiDialect,
  plain: plainDialect,
  fastapi: fastApiDialect,
};

export type DialectName = keyof typeof dialects;
