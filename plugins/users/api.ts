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
  /**
   * Creates a user; the first one is a superuser. With `superuser` registration, every user after
   * the first needs `creator` to be a superuser (401 without one, 403 otherwise), checked in the
   * creating transaction: of simultaneous first sign-ups exactly one succeeds. Throws 400 for a
   * taken username or email.
   */
  register(
    input: { username: string; email: string; full_name: string | null; password: string },
    options?: { requestId?: string; creator?: PublicUser },
  ): Promise<PublicUser>;
  /** The user with these credentials, or undefined (the same work is done either way). */
  authenticate(username: string, password: string): Promise<PublicUser | undefined>;
  issueToken(user: PublicUser): string;
  /**
   * The user a valid, unexpired token names (undefined when invalid, expired or the user is gone),
   * read from the store on every call, never from a cache: a deleted or deactivated user's token
   * stops working at once, whichever process changed the account.
   */
  userForToken(token: string): Promise<PublicUser | undefined>;
  /** Sets a user's `is_active`; the user as it is now, or undefined when there is no such user. */
  setActive(id: number, active: boolean, requestId?: string): Promise<PublicUser | undefined>;
  count(): Promise<number>;
}
