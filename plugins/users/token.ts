/**
 * Bearer tokens: compact JWTs signed with HMAC-SHA256 (HS256), with an expiry. Only HS256 is
 * accepted (the header is checked, so an `alg: none` token is refused) and the signature is
 * compared in constant time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface TokenClaims {
  /** The user's id, as a string. */
  sub: string;
  /** Issued at and expiry, seconds since the epoch. */
  iat: number;
  exp: number;
}

const header = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');

function sign(data: string, secret: Buffer): Buffer {
  return createHmac('sha256', secret).update(data).digest();
}

export function issueToken(subject: string, secret: Buffer, ttlSeconds: number, now = Date.now()): string {
  const iat = Math.floor(now / 1000);
  const claims: TokenClaims = { sub: subject, iat, exp: iat + ttlSeconds };
  const body = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${body}.${sign(body, secret).toString('base64url')}`;
}

/** The claims of a valid, unexpired token; undefined otherwise (whatever is wrong with it). */
export function verifyToken(token: string, secret: Buffer, now = Date.now()): TokenClaims | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== header) return undefined;
  const given = Buffer.from(parts[2]!, 'base64url');
  const expected = sign(`${parts[0]}.${parts[1]}`, secret);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as TokenClaims;
  } catch {
    return undefined;
  }
  if (typeof claims?.sub !== 'string' || typeof claims.exp !== 'number') return undefined;
  if (claims.exp <= Math.floor(now / 1000)) return undefined;
  return claims;
}
