/**
 * Typed errors. A stage throws a GatewayError naming *what* went wrong (its kind);
 * the service's dialect decides how that is written on the wire (status and body).
 */
export type ErrorKind =
  | 'bad_request'
  | 'parse_error'
  | 'invalid_rpc'
  | 'unauthorized'
  | 'forbidden'
  | 'policy_violation'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'validation_failed'
  | 'qom_failed'
  | 'rate_limited'
  | 'overloaded'
  | 'internal_error'
  | 'upstream_error'
  | 'upstream_invalid'
  | 'upstream_timeout'
  | 'unavailable';

/** Default HTTP status for each kind; a dialect may override. */
export const defaultStatus: Record<ErrorKind, number> = {
  bad_request: 400,
  parse_error: 400,
  invalid_rpc: 400,
  unauthorized: 401,
  forbidden: 403,
  policy_violation: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  qom_failed: 422,
  rate_limited: 429,
  overloaded: 503,
  internal_error: 500,
  upstream_error: 502,
  upstream_invalid: 502,
  upstream_timeout: 504,
  unavailable: 503,
};

export interface GatewayErrorOptions {
  /** Structured detail, written under `details` (or JSON-RPC `error.data`). */
  details?: Record<string, unknown>;
  /** Overrides the wire code (`error` field in the simple dialect), e.g. `stype_not_found`. */
  code?: string;
  /** Extra top-level fields of the body, e.g. `retry_after_seconds`, `available_stypes`. */
  extra?: Record<string, unknown>;
  /** Overrides the HTTP status chosen by the dialect. */
  status?: number;
  /** Response headers to set with the error (e.g. Retry-After). */
  headers?: Record<string, string>;
  /** Id of the JSON-RPC request this error answers, when known before `ctx.state.rpc` is set. */
  rpcId?: string | number | null;
  /**
   * In the jsonrpc dialect, write this transport-level error as a JSON-RPC error object with this
   * code (and its own status) rather than `{error, message, details}`: errors an MCP client reads
   * as JSON-RPC, such as its session's (as the MCP SDK servers answer them, code -32000).
   */
  rpcCode?: number;
  cause?: unknown;
}

/**
 * Marks GatewayErrors across copies of this module: a plugin package that bundles its own copy of
 * the runtime throws errors of *its* GatewayError class, which a plain `instanceof` would not
 * recognise (they would become 500s). `Symbol.for` gives every copy the same key.
 */
const brand = Symbol.for('switchyard.GatewayError');

export class GatewayError extends Error {
  /**
   * `err instanceof GatewayError` is true for an error of any copy of this class (it checks the
   * brand). A subclass keeps the ordinary prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): value is GatewayError {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof was asked about (maybe a subclass)
    if (this !== GatewayError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return isGatewayError(value);
  }

  readonly kind: ErrorKind;
  readonly details?: Record<string, unknown>;
  readonly code?: string;
  readonly extra?: Record<string, unknown>;
  readonly status?: number;
  readonly headers?: Record<string, string>;
  readonly rpcId?: string | number | null;
  readonly rpcCode?: number;

  constructor(kind: ErrorKind, message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.kind = kind;
    this.details = options.details;
    this.code = options.code;
    this.extra = options.extra;
    this.status = options.status;
    this.headers = options.headers;
    this.rpcId = options.rpcId;
    this.rpcCode = options.rpcCode;
  }
}

// On the prototype: inherited by every instance and subclass, not an own (serialised) field.
Object.defineProperty(GatewayError.prototype, brand, { value: true });

/** True for a GatewayError from this or any other copy of the runtime. */
export function isGatewayError(err: unknown): err is GatewayError {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[brand] === true;
}

/** Turns anything thrown into a GatewayError; unknown errors become internal_error without leaking internals. */
export function toGatewayError(err: unknown): GatewayError {
  if (isGatewayError(err)) return err;
  const e = err as { status?: number; expose?: boolean; message?: string; type?: string };
  // Errors from Koa/raw-body carry an HTTP status of their own.
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
    if (e.status === 413) return new GatewayError('payload_too_large', 'Request body exceeds the size limit');
    if (e.status === 415) return new GatewayError('unsupported_media_type', e.message ?? 'Unsupported media type');
    return new GatewayError('bad_request', e.expose && e.message ? e.message : 'Bad request');
  }
  return new GatewayError('internal_error', 'Internal error', { cause: err });
}
