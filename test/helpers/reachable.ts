/**
 * Whether a local service (Redis, PostgreSQL) accepts TCP connections, for suites that need it:
 * they skip with the reason shown when it does not, except under CI=true, where it is required.
 */
import { createConnection } from 'node:net';

export function tcpReachable(port: number, host = '127.0.0.1', timeoutMs = 1000): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = createConnection({ host, port });
    socket.setTimeout(timeoutMs);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export const PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
