/**
 * `switchyard admin …`: diagnostics of a running service over HTTP, from its ops-api endpoints.
 * Human tables by default, the endpoint's JSON with `--json`.
 *
 * Exit status: 0 done; 1 no answer or a server failure (connection refused, timeout, 5xx);
 * 2 refused or wrong usage (bad arguments, 401/403 token, 404 no such endpoint or no store).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Agent, type Dispatcher, fetch } from 'undici';
import { connectionsView, queryStatsView, slowQueriesView, statusView, storageStatsView } from './admin-views.ts';

export const adminUsage = `usage:
  switchyard admin status                    version, uptime, connections against the maximum, memory, CPU
  switchyard admin stats --queries           last hour's queries: totals, latency percentiles, top entities
  switchyard admin stats --storage           data, index and WAL size, free space, cache hit ratio
  switchyard admin slow-queries [--limit N]  slow query shapes (default 10)
  switchyard admin connections               open client connections: requests and duration
options:
  --url URL      the service (default $SWITCHYARD_ADMIN_URL, else http://127.0.0.1:8080)
  --token TOKEN  admin token, sent as X-Admin-Token (default $SWITCHYARD_ADMIN_TOKEN)
  --ca FILE      CA certificate (PEM) to trust for an https URL
  --json         print the JSON answer as it is
`;

const DEFAULT_URL = 'http://127.0.0.1:8080';
const TIMEOUT_MS = 10_000;

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
}

const processIo: Io = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  env: process.env,
};

type View = (body: never) => string;

/** Runs `switchyard admin <args>`; resolves to the exit status. */
export async function admin(args: string[], io: Io = processIo): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (err) {
    io.err(`switchyard admin: ${(err as Error).message}\n${adminUsage}`);
    return 2;
  }
  if (parsed.help) {
    io.out(adminUsage);
    return 0;
  }
  const target = endpoint(parsed);
  if (typeof target === 'string') {
    io.err(`switchyard admin: ${target}\n${adminUsage}`);
    return 2;
  }

  const base = (parsed.url ?? io.env.SWITCHYARD_ADMIN_URL ?? DEFAULT_URL).replace(/\/+$/, '');
  const token = parsed.token ?? io.env.SWITCHYARD_ADMIN_TOKEN;
  let url: URL;
  try {
    url = new URL(`${base}${target.path}`);
  } catch {
    io.err(`switchyard admin: not a URL: ${base}\n`);
    return 2;
  }
  let dispatcher: Dispatcher | undefined;
  if (parsed.ca) {
    try {
      dispatcher = new Agent({ connect: { ca: readFileSync(parsed.ca) } });
    } catch (err) {
      io.err(`switchyard admin: cannot read --ca ${parsed.ca}: ${(err as NodeJS.ErrnoException).code ?? err}\n`);
      return 2;
    }
  }

  const outcome = await call(url, token, dispatcher);
  await dispatcher?.close();
  if ('failure' in outcome) {
    io.err(`switchyard admin: ${outcome.failure}\n`);
    return outcome.exit;
  }
  io.out(parsed.json ? `${JSON.stringify(outcome.body, null, 2)}\n` : `${target.view(outcome.body as never)}\n`);
  return 0;
}

function parse(args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      ca: { type: 'string' },
      json: { type: 'boolean' },
      queries: { type: 'boolean' },
      storage: { type: 'boolean' },
      limit: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  return { ...values, positionals };
}

/** The endpoint and view for the command, or what is wrong with it. */
function endpoint(p: ReturnType<typeof parse>): { path: string; view: View } | string {
  const [command, ...extra] = p.positionals;
  if (extra.length > 0) return `unexpected argument ${extra[0]}`;
  switch (command) {
    case 'status':
      return { path: '/admin/status', view: statusView };
    case 'connections':
      return { path: '/admin/connections', view: connectionsView };
    case 'stats':
      if (p.queries === p.storage) return 'stats needs one of --queries or --storage';
      return p.queries
        ? { path: '/admin/stats/queries', view: queryStatsView }
        : { path: '/admin/stats/storage', view: storageStatsView };
    case 'slow-queries': {
      if (p.limit === undefined) return { path: '/admin/slow-queries', view: slowQueriesView };
      const n = Number(p.limit);
      if (!Number.isInteger(n) || n < 1) return `--limit takes a positive integer, not ${p.limit}`;
      return { path: `/admin/slow-queries?limit=${n}`, view: slowQueriesView };
    }
    case undefined:
      return 'which command?';
    default:
      return `unknown command ${command}`;
  }
}

type Outcome = { body: unknown } | { failure: string; exit: 1 | 2 };

async function call(url: URL, token: string | undefined, dispatcher: Dispatcher | undefined): Promise<Outcome> {
  let res: Awaited<ReturnType<typeof fetch>>;
  try {
    res = await fetch(url, {
      headers: { accept: 'application/json', ...(token ? { 'x-admin-token': token } : {}) },
      signal: AbortSignal.timeout(TIMEOUT_MS),
      dispatcher,
    });
  } catch (err) {
    return { failure: `cannot reach ${url.origin}: ${networkReason(err)}`, exit: 1 };
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.ok) {
    if (body === undefined)
      return { failure: `${url.pathname}: the answer is not JSON (is this an ops-api?)`, exit: 1 };
    return { body };
  }
  const message = errorMessage(body) ?? (text.trim().split('\n')[0] || res.statusText);
  const hint =
    res.status === 401 || res.status === 403
      ? ' (give the admin token with --token or SWITCHYARD_ADMIN_TOKEN)'
      : res.status === 404
        ? ` (no ops-api endpoint ${url.pathname} at ${url.origin}?)`
        : '';
  return { failure: `${res.status} ${message}${hint}`, exit: res.status >= 500 ? 1 : 2 };
}

/** `message` of the error body the service's dialect writes (simple, plain or openai). */
function errorMessage(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const b = body as { message?: unknown; error?: unknown };
  if (typeof b.message === 'string') return b.message;
  if (typeof b.error === 'string') return b.error;
  const nested = b.error as { message?: unknown } | undefined;
  return typeof nested?.message === 'string' ? nested.message : undefined;
}

/** `connection refused`, `timed out after 10 s`… from a failed fetch. */
function networkReason(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return `no answer after ${TIMEOUT_MS / 1000} s`;
  const code = e.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused (is the service running? check --url)';
  if (code === 'ENOTFOUND') return 'unknown host';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection closed by the server';
  return e.cause?.message ?? e.message;
}
