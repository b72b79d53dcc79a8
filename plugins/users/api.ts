/**
 * Public contract of the users plugin: the value of a `user-directory` resource (accounts in an
 * entity store, scrypt passwords, HS256 bearer tokens). Other plugins import this file only.
 */

/** A user as clients see it (never the password hash). */
export interface PublicUser {
  id: number;
  username: string;
  email: string;
  full_name: string | null;
  is_active: boolean;
  is_superuser: boolean;
  created_at: string;
}

export interface UserDirectory {
  /** False when the feature is off: the user routes answer 404 and guards let everything pass. */
  readonly enabled: boolean;
  /** `open`: anyone may register; `superuser`: after the first user, only a superuser. */
  readonly registration: 'open' | 'superuser';
  readonly tokenTtlSeconds: number;
  /** Creates a user; the first one is a superuser. Throws 400 for a taken username or email. */
  register(
    input: { username: string; email: string; full_name: string | null; password: string },
    requestId?: string,
  ): Promise<PublicUser>;
  /** The user with these credentials, or undefined (the same work is done either way). */
  authenticate(username: string, password: string): Promise<PublicUser | undefined>;
  issueToken(user: PublicUser): string;
  /** The user a valid, unexpired token names (undefined when invalid, expired or the user is gone). */
  userForToken(token: string): Promise<PublicUser | undefined>;
  count(): Promise<number>;
}
