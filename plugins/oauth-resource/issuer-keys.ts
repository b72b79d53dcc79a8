/**
 * The authorization server's signing keys, as the oauth-bearer stage checks tokens against them:
 * its `jwks_uri` (configured, or discovered from the issuer's metadata, RFC 8414, else OpenID
 * discovery) and the key set there (jose's remote key set: cached, refetched when a token names a
 * key id it does not hold).
 *
 * With the issuer down, each request used to run discovery again (two metadata requests), so a
 * burst of requests became a burst on the issuer. Now:
 * - one discovery at a time (single flight): concurrent requests wait for the same one;
 * - a failed discovery or key fetch is remembered for `failureCacheMs`: requests meanwhile are
 *   refused at once (503, `Retry-After`) without asking the issuer, then the next one tries again.
 * Either way nothing is accepted that was not checked (fail closed).
 *
 * A key fetch that answers other than 200, or not a JSON key set, is the issuer's failure (503),
 * not the token's: jose would report it as a JOSEError, which reads as an invalid token (401).
 */
import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from 'jose';

/** The keys could not be obtained: nothing can be checked. */
export class KeysUnavailable extends Error {
  override readonly name = 'KeysUnavailable';
  constructor(
    message: string,
    /** Until when (ms since epoch) the failure is remembered. */
    readonly until: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface IssuerKeysOptions {
  issuer: string;
  jwksUri?: string;
  failureCacheMs: number;
  /** Time allowed for one discovery or key set request. */
  timeoutMs?: number;
  /** Counted once per request sent to the issuer (metadata or key set). */
  onFetch?(kind: 'discovery' | 'jwks'): void;
}

export class IssuerKeys {
  private remote?: JWTVerifyGetKey;
  private discovering?: Promise<JWTVerifyGetKey>;
  private failure?: KeysUnavailable;
  private readonly timeoutMs: number;

  constructor(private readonly options: IssuerKeysOptions) {
    this.timeoutMs = options.timeoutMs ?? 5000;
  }

  /** The key for a token (jwtVerify's key function); throws KeysUnavailable when there is none to be had. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    this.throwIfFailedRecently();
    const remote = this.remote ?? (await this.discover());
    return remote(header, token);
  };

  private throwIfFailedRecently(): void {
    if (this.failure && Date.now() < this.failure.until) throw this.failure;
    this.failure = undefined;
  }

  private fail(message: string, cause?: unknown): KeysUnavailable {
    this.failure = new KeysUnavailable(message, Date.now() + this.options.failureCacheMs, { cause });
    return this.failure;
  }

  private discover(): Promise<JWTVerifyGetKey> {
    this.discovering ??= (async () => {
      try {
        const uri = this.options.jwksUri ?? (await this.discoverJwksUri());
        let url: URL;
        try {
          url = new URL(uri);
        } catch (err) {
          throw this.fail('the issuer metadata names no valid jwks_uri', err);
        }
        this.remote = createRemoteJWKSet(url, {
          cooldownDuration: 30_000,
          cacheMaxAge: 600_000,
          timeoutDuration: this.timeoutMs,
          [customFetch]: (u, init) => this.fetchKeySet(u, init),
        });
        return this.remote;
      } finally {
        this.discovering = undefined;
      }
    })();
    return this.discovering;
  }

  /** The issuer's `jwks_uri`, from its authorization server metadata (RFC 8414), else OpenID discovery. */
  private async discoverJwksUri(): Promise<string> {
    const { issuer } = this.options;
    const base = issuer.replace(/\/$/, '');
    const u = new URL(issuer);
    const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
    const failures: string[] = [];
    for (const url of [
      `${u.origin}/.well-known/oauth-authorization-server${path}`,
      `${base}/.well-known/openid-configuration`,
    ]) {
      try {
        this.options.onFetch?.('discovery');
        const res = await fetch(url, { signal: AbortSignal.timeout(this.timeoutMs) });
        if (!res.ok) {
          await res.body?.cancel();
          failures.push(`${res.status}`);
          continue;
        }
        const meta = (await res.json()) as { issuer?: string; jwks_uri?: string };
        // RFC 8414 §3.3: the metadata must name the issuer it was fetched for.
        if (meta.issuer === issuer && typeof meta.jwks_uri === 'string') return meta.jwks_uri;
        failures.push('no matching issuer and jwks_uri');
      } catch (err) {
        const name = (err as Error).name;
        failures.push(name === 'TimeoutError' ? 'timeout' : name === 'SyntaxError' ? 'not JSON' : 'unreachable');
      }
    }
    throw this.fail(`no jwks_uri found in the metadata of the issuer (${failures.join(', ')})`);
  }

  /** jose's fetch of the key set: a failure is remembered, and one in its window is not sent again. */
  private async fetchKeySet(url: string, init: Parameters<typeof fetch>[1]): Promise<Response> {
    this.throwIfFailedRecently();
    this.options.onFetch?.('jwks');
    let res: Response;
    try {
      res = await fetch(url, init);
    } catch (err) {
      throw this.fail(
        (err as Error).name === 'TimeoutError' ? 'the key set did not answer in time' : 'the key set is unreachable',
        err,
      );
    }
    const text = await res.text().catch(() => undefined);
    if (res.status !== 200 || text === undefined) throw this.fail(`the key set answered ${res.status}`);
    let keys: unknown;
    try {
      keys = (JSON.parse(text) as { keys?: unknown }).keys;
    } catch (err) {
      throw this.fail('the key set is not JSON', err);
    }
    if (!Array.isArray(keys)) throw this.fail('the key set holds no keys array');
    return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
  }
}
