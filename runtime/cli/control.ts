/**
 * `switchyard health|config|reload <service|config file|URL>`: the admin listener of a running
 * service (runtime/server/admin.ts) from the command line. Human output by default, the JSON
 * answer with `--json`. Exit status: 0 done (healthy, reloaded); 1 unhealthy, reload refused, or
 * no answer; 2 wrong usage or refused (token).
 */
import { parseArgs } from 'node:util';
import { callService } from './http.ts';
import type { CliIo } from './io.ts';
import { renderPairs, renderTable } from './table.ts';
import { resolveTarget } from './targets.ts';

export const controlUsage = `usage:
  switchyard health <service> [--json]     health of everything the service runs (upstreams, resources, stages)
  switchyard config <service> [--json]     what runs now: config hash, load time, routes and their stages
  switchyard reload <service> [--data]     reload the config as one transaction (--data: policy and data files only)
<service> is a running service's name (see switchyard ps), its config file, or its admin URL.
options:
  --token TOKEN  the admin token (default $SWITCHYARD_ADMIN_TOKEN, else the config file's admin.token)
  --ca FILE      CA certificate (PEM) to trust for an https URL
  --json         print the JSON answer as it is
`;

type Command = 'health' | 'config' | 'reload';

export async function control(command: Command, args: string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (err) {
    io.err(`switchyard ${command}: ${(err as Error).message.split('. ')[0]} (see switchyard ${command} --help)\n`);
    return 2;
  }
  if (parsed.help) {
    io.out(controlUsage);
    return 0;
  }
  const [arg, ...extra] = parsed.positionals;
  if (arg === undefined || extra.length > 0) {
    const problem = arg === undefined ? 'which service?' : `unexpected argument ${extra[0]}`;
    io.err(`switchyard ${command}: ${problem} (see switchyard ${command} --help)\n`);
    return 2;
  }
  if (parsed.data && command !== 'reload') {
    io.err(`switchyard ${command}: --data is an option of reload\n`);
    return 2;
  }
  const target = await resolveTarget(arg, 'admin', io.env);
  if (typeof target === 'string') {
    io.err(`switchyard ${command}: ${target}\n`);
    return 2;
  }
  const token = parsed.token ?? io.env.SWITCHYARD_ADMIN_TOKEN ?? target.token;
  const path =
    command === 'health'
      ? '/admin/health'
      : command === 'config'
        ? '/admin/config'
        : `/admin/reload${parsed.data ? '?scope=data' : ''}`;
  let url: URL;
  try {
    url = new URL(`${target.base}${path}`);
  } catch {
    io.err(`switchyard ${command}: not a URL: ${target.base}\n`);
    return 2;
  }
  const outcome = await callService(url, {
    method: command === 'reload' ? 'POST' : 'GET',
    token,
    ca: parsed.ca,
    notFoundHint: `is ${target.base} the service's admin listener?`,
  });
  // A 503 health report and a 422 refused reload are answers to show, not transport failures.
  const answered = outcome.ok || (outcome.body !== undefined && (outcome.status === 503 || outcome.status === 422));
  if (!answered) {
    io.err(`switchyard ${command}: ${outcome.failure}\n`);
    return outcome.exit;
  }
  const body = outcome.body as Record<string, unknown>;
  io.out(parsed.json ? `${JSON.stringify(body, null, 2)}\n` : `${views[command](body)}\n`);
  return outcome.ok ? 0 : 1;
}

function parse(args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      token: { type: 'string' },
      ca: { type: 'string' },
      json: { type: 'boolean' },
      data: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  return { ...values, positionals };
}

interface Check {
  ok?: boolean;
  status?: string;
  error?: string;
}

const views: Record<Command, (body: Record<string, unknown>) => string> = {
  health(body) {
    const checks = Object.entries((body.checks ?? {}) as Record<string, Check>);
    const head = `${String(body.status ?? '?')}: ${checks.filter(([, c]) => c.ok).length} of ${checks.length} checks ok`;
    if (checks.length === 0) return head;
    const rows = checks.map(([name, c]) => [name, c.ok ? 'ok' : 'FAIL', c.status ?? '', c.error ?? '']);
    return `${head}\n${renderTable([{ title: 'CHECK' }, { title: 'OK' }, { title: 'STATUS' }, { title: 'ERROR' }], rows)}`;
  },
  config(body) {
    const routes = (body.routes ?? []) as Array<{ id: string; dialect: string; stages: Array<{ plugin: string }> }>;
    const last = body.last_reload as { ok?: boolean; at?: string; error?: string } | null;
    const pairs: Array<[string, string]> = [
      ['service', `${String(body.service)} ${String(body.version ?? '')}`.trim()],
      ['file', String(body.file ?? '-')],
      ['config hash', String(body.config_hash ?? '-')],
      ['loaded at', String(body.loaded_at ?? '-')],
      ['last reload', last ? `${last.ok ? 'ok' : `failed: ${last.error ?? ''}`} at ${last.at}` : 'none'],
      ['in flight', String(body.in_flight ?? 0)],
    ];
    const table = renderTable(
      [{ title: 'ROUTE' }, { title: 'DIALECT' }, { title: 'STAGES' }],
      routes.map((r) => [r.id, r.dialect, r.stages.map((s) => s.plugin).join(' > ')]),
    );
    return `${renderPairs(pairs)}\n\n${table}`;
  },
  reload(body) {
    if (body.status === 'reloaded') {
      const changed = body.changed === false ? 'unchanged' : `${short(body.previous_hash)} -> ${short(body.hash)}`;
      return body.scope === 'data' ? 'reloaded (data)' : `reloaded (${changed})`;
    }
    const problems = (body.problems ?? []) as Array<{ file?: string; line?: number; path?: string; message: string }>;
    const lines = problems.map((p) => `  ${p.file ?? ''}${p.line ? `:${p.line}` : ''} ${p.path ?? ''}: ${p.message}`);
    return [`reload refused, the running config is unchanged: ${String(body.error ?? '')}`.trimEnd(), ...lines].join(
      '\n',
    );
  },
};

function short(hash: unknown): string {
  return typeof hash === 'string' ? hash.slice(0, 12) : '?';
}
