/**
 * An answer a stage must read but cannot: undecodable, the wrong content type, invalid or cut-short
 * JSON, too large to read, a stream that ends without its terminator. A stage throws it (or the
 * runtime's readers do, e.g. `answer.json()`), and the runtime decides by the stage's
 * `on_uninspectable`: `refuse` (the default) answers 502 in the route's dialect and records an
 * `unchecked` decision; `pass` lets the answer through unread, counted, marked and recorded as
 * `passed-unchecked`. Passing an answer nobody checked is never silent.
 */
import { GatewayError } from '../errors.ts';

/** Why an answer could not be inspected (a metric label: keep the set closed). */
export type UncheckedReason =
  | 'encoding'
  | 'content_type'
  | 'invalid_json'
  | 'not_rpc'
  | 'invalid_event'
  | 'too_large'
  | 'truncated';

export class UninspectableAnswer extends GatewayError {
  constructor(
    readonly reason: UncheckedReason,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super('upstream_invalid', `The upstream's answer could not be checked: ${message}`, {
      details: { unchecked: reason },
      cause: options.cause,
    });
  }
}

/** True for an UninspectableAnswer (of this copy of the runtime or another: checks the kind). */
export function isUninspectable(err: unknown): err is UninspectableAnswer {
  return (
    err instanceof GatewayError &&
    err.kind === 'upstream_invalid' &&
    typeof (err as { reason?: unknown }).reason === 'string'
  );
}
