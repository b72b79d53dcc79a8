/**
 * The primary's change feed: a small HTTP server on `bind` (the seed's replication port, 5433 in
 * its sample) that serves the entity store's ordered change log to replicas.
 *
 *   GET /v1/changes?after=<seq>&limit=<n>&wait_ms=<ms>
 *     → 200 { changes: ChangeRecord[], last_seq }   (long poll: waits up to wait_ms for news)
 *   GET /v1/status → 200 { role: "primary", last_seq }
 *
 * One server per bind address and process: a hot reload builds a new graph while the old one is
 * still draining, so the listener is shared between them and handed to the newest (refcounted).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { EntityStore } from '../../runtime/index.ts';

export interface FeedSource {
  store: EntityStore;
  token?: string;
  /** Poll interval of a waiting long poll, ms. */
  pollMs: number;
}

interface Shared {
  server: Server;
  source: FeedSource;
  users: number;
  ready: Promise<void>;
}

const servers = new Map<string, Shared>();
const digest = (s: string) => createHash('sha256').update(s).digest();
const MAX_LIMIT = 5000;
const MAX_WAIT_MS = 30_000;

/** Starts (or takes over) the feed on `host:port`; resolves to a release function. */
export async function serveFeed(
  bind: { host: string; port: number },
  source: FeedSource,
): Promise<() => Promise<void>> {
  const key = `${bind.host}:${bind.port}`;
  let shared = servers.get(key);
  if (shared) {
    shared.source = source;
    shared.users++;
  } else {
    const entry: Shared = { server: createServer(), source, users: 1, ready: Promise.resolve() };
    entry.server.on('request', (req, res) => {
      handle(entry.source, req, res).catch((err: Error) =>
        send(res, 500, { error: 'internal_error', message: err.message }),
      );
    });
    entry.ready = new Promise<void>((resolve, reject) => {
      entry.server.once('error', reject);
      entry.server.listen(bind.port, bind.host, () => {
        entry.server.off('error', reject);
        resolve();
      });
    });
    servers.set(key, entry);
    shared = entry;
    try {
      await entry.ready;
    } catch (err) {
      servers.delete(key);
      throw new Error(`replication feed cannot listen on ${key}: ${(err as Error).message}`);
    }
  }
  await shared.ready;
  const held = shared;
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    if (--held.users > 0) return;
    servers.delete(key);
    held.server.closeAllConnections();
    await new Promise<void>((resolve) => held.server.close(() => resolve()));
  };
}

/** The port a feed actually listens on (for `bind` port 0). */
export function feedPort(bind: { host: string; port: number }): number | undefined {
  const address = servers.get(`${bind.host}:${bind.port}`)?.server.address();
  return address && typeof address === 'object' ? address.port : undefined;
}

async function handle(source: FeedSource, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (source.token) {
    const given = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (!timingSafeEqual(digest(given), digest(source.token))) {
      return send(res, 401, { error: 'unauthorized', message: 'Replication token missing or wrong' });
    }
  }
  const url = new URL(req.url ?? '/', 'http://feed');
  if (req.method !== 'GET') return send(res, 405, { error: 'method_not_allowed', message: 'GET only' });
  if (url.pathname === '/v1/status') {
    return send(res, 200, { role: 'primary', last_seq: await source.store.lastSeq() });
  }
  if (url.pathname !== '/v1/changes') return send(res, 404, { error: 'not_found', message: 'No such path' });

  const after = integer(url.searchParams.get('after'), 0);
  const askedLimit = integer(url.searchParams.get('limit'), 1000);
  const askedWait = integer(url.searchParams.get('wait_ms'), 0);
  if (after === undefined || askedLimit === undefined || askedLimit < 1 || askedWait === undefined) {
    return send(res, 400, { error: 'bad_request', message: 'after, limit and wait_ms are non-negative integers' });
  }
  const limit = Math.min(askedLimit, MAX_LIMIT);
  const waitMs = Math.min(askedWait, MAX_WAIT_MS);
  // Long poll: wait for news (or the client leaving, or the deadline), then answer.
  const deadline = Date.now() + waitMs;
  let closed = false;
  req.once('close', () => {
    closed = true;
  });
  let last = await source.store.lastSeq();
  while (last <= after && Date.now() < deadline && !closed) {
    await new Promise((r) => setTimeout(r, source.pollMs));
    last = await source.store.lastSeq();
  }
  if (closed) return;
  const changes = last > after ? await source.store.changesSince(after, limit) : [];
  send(res, 200, { changes, last_seq: last });
}

function integer(value: string | null, fallback: number): number | undefined {
  if (value === null || value === '') return fallback;
  return /^\d{1,15}$/.test(value) ? Number(value) : undefined;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
