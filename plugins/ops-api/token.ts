/**
 * The admin token check: both sides reduced to SHA-256 digests (fixed length) and compared with
 * timingSafeEqual, as the `auth` stage does, so the answer time tells nothing about the token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export function tokenChecker(token: string): (presented: string) => boolean {
  // An empty token usually means an unset ${VAR}: refuse to start rather than accept anything.
  if (token.trim() === '') throw new Error('ops-api token is empty (unset environment variable?)');
  const expected = createHash('sha256').update(token, 'utf8').digest();
  // Header values come as Node gives them (one char per byte): latin1 gives back the UTF-8 bytes.
  return (presented) => timingSafeEqual(createHash('sha256').update(presented, 'latin1').digest(), expected);
}
