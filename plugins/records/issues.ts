/**
 * Validation issues in FastAPI's shape: each names where (`loc`, e.g. ["body", "name"] or
 * ["query", "limit"]), what (`type`, pydantic's error types) and a readable `msg`. A request
 * with issues is refused as one `validation_failed` (422) error carrying them all in
 * `details.errors`; the `fastapi` dialect writes them as `{"detail": [...]}`.
 */
import { GatewayError } from '../../runtime/index.ts';

export interface ValidationIssue {
  type: string;
  loc: Array<string | number>;
  msg: string;
  /** The offending value, when it is small enough to echo. */
  input?: unknown;
  ctx?: Record<string, unknown>;
}

/** Echo an input only when it is short: never copy a huge body into an error. */
export function echo(value: unknown): unknown {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value.length <= 200 ? value : `${value.slice(0, 200)}…`;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  const json = JSON.stringify(value);
  return json !== undefined && json.length <= 200 ? value : '[value too large to echo]';
}

export function issue(
  type: string,
  loc: Array<string | number>,
  msg: string,
  input?: unknown,
  ctx?: Record<string, unknown>,
): ValidationIssue {
  return { type, loc, msg, ...(input !== undefined ? { input: echo(input) } : {}), ...(ctx ? { ctx } : {}) };
}

/** One 422 for every issue found. */
export function validationError(issues: ValidationIssue[]): GatewayError {
  const first = issues[0];
  const message = first ? `${first.loc.join('.')}: ${first.msg}` : 'Validation failed';
  return new GatewayError('validation_failed', message, { details: { errors: issues } });
}
