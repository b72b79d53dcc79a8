/**
 * The endpoint tag of a balanced MCP upstream's session ids (jsonrpc-balanced.ts): 8 hex digits
 * of HMAC-SHA256 of the endpoint's URL under a per-deployment secret. Unkeyed, the tag was a hash
 * of the URL anyone could recompute: a client holding a session id recovered which internal URL
 * served it by hashing guesses offline (0.3 s for a private network's addresses). Keyed, the tag
 * says nothing without the secret.
 *
 * The secret is `SWITCHYARD_SESSION_TAG_SECRET` (at least 16 characters), the same for every
 * gateway process of a deployment, so that a session opened through one process continues
 * through another and across restarts. Unset, each process draws a random one: a cluster's
 * workers share their primary's (it hands it to them), but separate processes, and a process
 * after a restart, tag differently, and their clients' sessions must initialize again (the
 * endpoint answers 404 to an id it did not issue; MCP clients do that by themselves).
 */
import { createHmac, randomBytes } from 'node:crypto';

export const sessionTagSecretVariable = 'SWITCHYARD_SESSION_TAG_SECRET';
const minLength = 16;

let drawn: string | undefined;

export interface TagSecret {
  secret: string;
  /** Drawn by this process (the variable is unset). */
  random: boolean;
}

/** The deployment's secret, else this process's own random one. */
export function sessionTagSecret(environment: NodeJS.ProcessEnv = process.env): TagSecret {
  const set = environment[sessionTagSecretVariable];
  if (set !== undefined && set !== '') {
    if (set.length < minLength) {
      throw new Error(`${sessionTagSecretVariable} must be at least ${minLength} characters (it keys session tags)`);
    }
    return { secret: set, random: false };
  }
  drawn ??= randomBytes(32).toString('base64url');
  return { secret: drawn, random: true };
}

/** What a cluster primary gives its workers, so that they all tag alike (and a re-forked one too). */
export function workersTagSecret(environment: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return { [sessionTagSecretVariable]: sessionTagSecret(environment).secret };
}

/** An endpoint's tag: 8 hex digits of HMAC-SHA256(secret, label). */
export function endpointTag(secret: string, label: string): string {
  return createHmac('sha256', secret).update(label).digest('hex').slice(0, 8);
}
