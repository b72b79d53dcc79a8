/**
 * Redis for tests, at 127.0.0.1:6379. A suite that needs it skips with the reason shown when it is
 * unreachable, except under CI=true, where an unreachable Redis is a failing test.
 */
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';
import { tcpReachable } from './reachable.ts';

export const REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * Whether Redis answers. When it does not, warns that `suite` is skipped, or under CI=true
 * registers a failing test: call it at the top level of the test file.
 */
export async function redisReachable(suite: string): Promise<boolean> {
  const up = await tcpReachable(6379);
  if (up) return true;
  if (process.env.CI !== 'true') {
    console.warn(`${suite} skipped: no Redis reachable at 127.0.0.1:6379`);
  } else {
    it('Redis is reachable at 127.0.0.1:6379 (required when CI=true)', () => {
      expect.fail('Redis is not reachable at 127.0.0.1:6379; CI must provide it');
    });
  }
  return false;
}

/** Deletes the keys a test run wrote under `prefix`. */
export async function deleteKeys(prefix: string): Promise<void> {
  const admin = new Redis(REDIS_URL);
  const keys = await admin.keys(`${prefix}*`);
  if (keys.length > 0) await admin.del(...keys);
  await admin.quit();
}
