/**
 * The configured tokens and the constant-time lookup. Both the presented and the configured
 * tokens are reduced to SHA-256 digests (fixed length) and compared with timingSafeEqual, and every
 * configured token is compared on every request: the response time reveals neither a token's
 * content, nor its length, nor which entry matched.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Caller } from '../../runtime/index.ts';

export type TokenSpec = string | { name?: string; token: string; attributes?: Record<string, unknown> };

export interface TokenSet {
  count: number;
  /**
   * The caller owning `presented` (a header value as Node gives it: one char per byte), or
   * undefined. Configured tokens are UTF-8, so a client sending UTF-8 bytes matches.
   */
  match(presented: string): Caller | undefined;
}

interface Entry {
  digest: Buffer;
  caller: Caller;
}

export function compileTokens(specs: TokenSpec[]): TokenSet {
  if (specs.length === 0) throw new Error('auth is enabled but no tokens are configured');
  const names = new Set<string>();
  const entries: Entry[] = specs.map((spec, i) => {
    const { name, token, attributes } = typeof spec === 'string' ? { token: spec } : spec;
    // An empty token usually means an unset ${VAR}: refuse to start rather than accept anything.
    if (token.trim() === '') throw new Error(`auth token #${i + 1} is empty (unset environment variable?)`);
    const id = name ?? `token-${i + 1}`;
    if (names.has(id)) throw new Error(`auth token name "${id}" is used twice`);
    names.add(id);
    return { digest: digest(token, 'utf8'), caller: { id, authenticated: true, attributes: attributes ?? {} } };
  });

  return {
    count: entries.length,
    match(presented) {
      const d = digest(presented, 'latin1');
      let found: Caller | undefined;
      for (const entry of entries) {
        // No early exit: the loop costs the same whichever entry (if any) matches.
        const equal = timingSafeEqual(d, entry.digest);
        if (equal && !found) found = entry.caller;
      }
      return found ? { ...found, attributes: { ...found.attributes } } : undefined;
    },
  };
}

function digest(token: string, encoding: 'utf8' | 'latin1'): Buffer {
  return createHash('sha256').update(token, encoding).digest();
}
