/**
 * Login throttling: after `account_failures` failed logins for one username, or
 * `address_failures` from one client address, within `window_seconds` (a fixed window from the
 * first failure), logins for that username or from that address are refused with 429 and
 * `Retry-After` (the seconds left in the window) until the window ends, before any password is
 * checked. A successful login clears its account's count (not its address's). Counters live in
 * the process (rate-limiter-flexible's memory limiter): per worker in cluster mode, and a reload
 * starts them afresh.
 *
 * Why both: per account stops guessing one user's password from many addresses; per address stops
 * one client trying a common password on many accounts. The per-account limit also lets anyone
 * lock an account out for a window with a few wrong passwords: the price of stopping guessing.
 */
import { RateLimiterMemory, type RateLimiterRes } from 'rate-limiter-flexible';
import { type FromSchema, GatewayError, type JsonSchema } from '../../runtime/index.ts';

export const throttleOptionsSchema = {
  type: 'object',
  additionalProperties: false,
  default: {},
  description: 'Failed logins allowed per username and per client address within a window; more: 429.',
  properties: {
    account_failures: { type: 'integer', minimum: 1, default: 5 },
    address_failures: { type: 'integer', minimum: 1, default: 20 },
    window_seconds: { type: 'integer', minimum: 1, default: 900 },
  },
} as const satisfies JsonSchema;
/** The limits, defaults applied (the user-token stage's `throttle` option). */
export type ThrottleOptions = FromSchema<typeof throttleOptionsSchema>;

export class LoginThrottle {
  private readonly account: RateLimiterMemory;
  private readonly address: RateLimiterMemory;
  private readonly limits: ThrottleOptions;

  constructor(limits: ThrottleOptions) {
    this.limits = limits;
    const duration = this.limits.window_seconds;
    this.account = new RateLimiterMemory({ keyPrefix: 'account', points: this.limits.account_failures, duration });
    this.address = new RateLimiterMemory({ keyPrefix: 'address', points: this.limits.address_failures, duration });
  }

  /** Throws 429 when the username or the address used up its failures. */
  async check(username: string, address: string): Promise<void> {
    const [byAccount, byAddress] = await Promise.all([this.account.get(username), this.address.get(address)]);
    const waits: number[] = [];
    if (byAccount && byAccount.consumedPoints >= this.limits.account_failures) waits.push(byAccount.msBeforeNext);
    if (byAddress && byAddress.consumedPoints >= this.limits.address_failures) waits.push(byAddress.msBeforeNext);
    if (waits.length === 0) return;
    const seconds = Math.max(1, Math.ceil(Math.max(...waits) / 1000));
    throw new GatewayError('rate_limited', `Too many failed logins; retry in ${seconds} seconds`, {
      headers: { 'Retry-After': String(seconds) },
    });
  }

  async failed(username: string, address: string): Promise<void> {
    // consume() rejects (with the state) once the points are used up: nothing to do then.
    const spend = (limiter: RateLimiterMemory, key: string) =>
      limiter.consume(key).catch((state: RateLimiterRes | Error) => {
        if (state instanceof Error) throw state;
      });
    await Promise.all([spend(this.account, username), spend(this.address, address)]);
  }

  async succeeded(username: string): Promise<void> {
    await this.account.delete(username);
  }
}
