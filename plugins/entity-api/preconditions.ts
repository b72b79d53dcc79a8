/**
 * Entity versions as HTTP validators: the ETag of an entity is its version, `"<version>"`
 * (strong). `If-Match` makes a write conditional (412 when the entity moved on); `If-None-Match`
 * makes a read answer 304 when the client's copy is current.
 */
import { type GatewayContext, GatewayError } from '../../runtime/index.ts';

export const etag = (version: number) => `"${version}"`;

/** Versions an `If-Match` / `If-None-Match` header lists, `'*'` for any, undefined when absent. */
export function parseEtags(ctx: GatewayContext, header: 'If-Match' | 'If-None-Match'): Set<number> | '*' | undefined {
  const raw = ctx.get(header).trim();
  if (raw === '') return undefined;
  if (raw === '*') return '*';
  const versions = new Set<number>();
  for (const part of raw.split(',')) {
    const m = /^\s*(W\/)?"([1-9]\d{0,15})"\s*$/.exec(part);
    if (!m) {
      throw new GatewayError('bad_request', `${header} must list entity versions as ETags, e.g. "3"`, {
        code: 'invalid_header',
        details: { header },
      });
    }
    // If-Match compares strongly (RFC 9110 13.1.1): a weak tag never matches it.
    if (m[1] && header === 'If-Match') continue;
    versions.add(Number(m[2]));
  }
  return versions;
}

export function preconditionFailed(type: string, id: number, current: number): GatewayError {
  return new GatewayError('conflict', `${type} ${id} is at version ${current}, which If-Match does not list`, {
    status: 412,
    code: 'precondition_failed',
    details: { type, id, current_version: current },
    headers: { ETag: etag(current) },
  });
}

export function preconditionRequired(): GatewayError {
  return new GatewayError('bad_request', 'This API requires If-Match on writes: send the ETag of the entity you read', {
    status: 428,
    code: 'precondition_required',
    details: { header: 'If-Match' },
  });
}
