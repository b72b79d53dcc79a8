/**
 * `switchyard admin …`: diagnostics of a running service over HTTP, from its ops-api endpoints.
 * Human tables by default, the endpoint's JSON with `--json`.
 *
 * Exit status: 0 done; 1 no answer or a server failure (connection refused, timeout, 5xx);
 * 2 refused or wrong usage (bad arguments, 401/403 token, 404 no such endpoint or no store).
 */
import { parseArgs } from 'node:util';
import { connectionsView, queryStatsView, slowQueriesView, statusView, storageStatsView } from './admin-views.ts';
import { callService } from './http.ts';
import { type CliIo, processIo } from './io.ts';
import { findRun } from './run-registry.ts';
import { resolveTarget } from './targets.ts';

export const adminUsage = `usage:
  switchyard admin status                    version, uptime, connections against the maximum, memory, CPU
  switchyard admin stats --queries           last hour's queries: totals, latency percentiles, top entities
  switchyard admin stats --storage           data, index and WAL size, free space, cache hit ratio
  switchyard admin slow-queries [--limit N]  slow query shapes (default 10)
  switchyard admin connections               open client connections: requests and duration
options:
  --service S    the service: a running service's name, or its config file (default: the running
                 "datastore", else http://127.0.0.1:8080); a config file also gives the ops-api token
  --url URL      the service's URL instead (default $SWITCHYARD_ADMIN_URL)
  --token TOKEN  admin token, sent as Authorization: Bearer (default $SWITCHYARD_ADMIN_TOKEN)
  --ca FILE      CA certificate (PEM) to trust for an https URL
  --json         print the JSON answer as it is
`;

/** The seed's default port of the datastore, when no running datastore is recorded. */
const DEFAULT_URL = 'http://127.0.0.1:8080';

type View = (body: never) => string;

/** Runs `switchyard admin <args>`; resolves to the exit status. */
export async function admin(args: string[], io: CliIo = processIo): Promise<number> {
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
  const service = await serviceBase(parsed, io.env);
  if (typeof service === 'string') {
    io.err(`switchyard admin: ${service}\n`);
    return 2;
  }
  const token = parsed.token ?? io.env.SWITCHYARD_ADMIN_TOKEN ?? service.token;
  let url: URL;
  try {
    url = new URL(`${service.base.replace(/\/+$/, '')}${target.path}`);
  } catch {
    io.err(`switchyard admin: not a URL: ${service.base}\n`);
    return 2;
  }
  const outcome = await callService(url, {
    token,
    ca: parsed.ca,
    notFoundHint: `no ops-api endpoint ${url.pathname} at ${url.origin}?`,
  });
  if (!outcome.ok) {
    io.err(`switchyard admin: ${outcome.failure}\n`);
    return outcome.exit;
  }
  io.out(parsed.json ? `${JSON.stringify(outcome.body, null, 2)}\n` : `${target.view(outcome.body as never)}\n`);
  return 0;
}

/** --url, else $SWITCHYARD_ADMIN_URL, else --service, else the running datastore, else :8080. */
async function serviceBase(
  p: ReturnType<typeof parse>,
  env: Record<string, string | undefined>,
): Promise<{ base: string; token?: string } | string> {
  if (p.url !== undefined && p.service !== undefined) return 'give --url or --service, not both';
  const url = p.url ?? (p.service === undefined ? env.SWITCHYARD_ADMIN_URL : undefined);
  if (url !== undefined) return { base: url };
  if (p.service !== undefined) return resolveTarget(p.service, 'ops', env);
  return { base: findRun('datastore', env)?.url ?? DEFAULT_URL };
}

function parse(args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      service: { type: 'string' },
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
