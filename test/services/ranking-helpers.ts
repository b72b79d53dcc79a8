/**
 * Shared by the ranking service tests: starting configs/ranking.yaml on SQLite (a temporary
 * file) or PostgreSQL (tables under a unique prefix, dropped afterwards), and small JSON helpers.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { openSqlDatabase } from '../../runtime/index.ts';
import { dropEntitySchema } from '../../runtime/store/entity-schema.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { PG_URL, tcpReachable } from '../helpers/reachable.ts';

export const config = join(import.meta.dirname, '../../configs/ranking.yaml');
export const SCRYPT_COST = 1024;
export const pgUp = await tcpReachable(5432);
/** PostgreSQL suites skip when it is not reachable, except under CI=true where that fails. */
export const skipPg = !pgUp && process.env.CI !== 'true';
export const backends = [
  { driver: 'sqlite' as const, skip: false },
  { driver: 'postgres' as const, skip: skipPg },
];

export interface Ranking {
  svc: StartedService;
  /** The service's error-level log lines (the first 20), to say why a request failed. */
  errors: string[];
  /** The environment it was started with (database path and table prefix included). */
  env: Record<string, string>;
  url: string;
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  send(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  /** POST/GET and parse, expecting `status`. */
  json<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    status?: number,
    headers?: Record<string, string>,
  ): Promise<T>;
  close(): Promise<void>;
}

export async function startRanking(
  driver: 'sqlite' | 'postgres',
  env: Record<string, string> = {},
  set: string[] = [],
): Promise<Ranking> {
  const prefix = `rank_${randomUUID().replace(/-/g, '').slice(0, 10)}_`;
  const dir = mkdtempSync(join(tmpdir(), 'ranking-'));
  const fullEnv = {
    RANK_DB_DRIVER: driver,
    RANK_DB_PATH: join(dir, 'ranking.db'),
    RANK_DB_URL: PG_URL,
    RANK_DB_PREFIX: prefix,
    ...env,
  };
  const errors: string[] = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => void (errors.length < 20 && errors.push(line)) });
  // scrypt at its lowest allowed cost: these tests prove who may sign up and log in, not what a
  // hash costs (16x less CPU per hash; one test hashes 40 passwords).
  const svc = await startService(config, {
    set: [`resources.users.scrypt_cost=${SCRYPT_COST}`, ...set],
    env: fullEnv,
    logger,
  });
  const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${svc.url}${path}`, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  return {
    svc,
    errors,
    env: fullEnv,
    url: svc.url,
    get: (path, headers) => send('GET', path, undefined, headers),
    send,
    async json<T>(method: string, path: string, body?: unknown, status = 200, headers?: Record<string, string>) {
      const res = await send(method, path, body, headers);
      const text = await res.text();
      if (res.status !== status) throw new Error(`${method} ${path}: ${res.status} (expected ${status}) ${text}`);
      return JSON.parse(text) as T;
    },
    async close() {
      await svc.close();
      if (driver === 'postgres' && pgUp) {
        const db = await openSqlDatabase({ driver: 'postgres', url: PG_URL });
        await dropEntitySchema(db, prefix);
        await db.close();
      }
    },
  };
}

export interface EntityJson {
  id: number;
  name: string;
  description: string | null;
  image_urls: string[];
  rating: number;
}

export interface ComparisonJson {
  id: number;
  entity1_id: number;
  entity2_id: number;
  selected_entity_id: number;
  created_at: string;
}
