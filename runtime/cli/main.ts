/**
 * `switchyard` command line: serve, validate, schema, health, config, reload, ps, admin.
 * Every command answers --help (exit 0); a wrong option or argument is one line and exit 2.
 */
import cluster from 'node:cluster';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { ConfigError, formatProblem } from '../config/source.ts';
import type { Gateway } from '../gateway.ts';
import { localUrl } from '../server/listener.ts';
import { processIo } from './io.ts';
import { listRuns, type RunEntry, recordRun } from './run-registry.ts';
import { renderTable } from './table.ts';

// What a command needs is imported when it runs: `--help`, `ps` and the admin commands do not load
// the runtime and every plugin (about 2 s of CPU from the sources).

const usage = `usage:
  switchyard serve <config...> [--set path=value ...]   run services
      --workers N|auto   N worker processes sharing the listeners (node:cluster); auto: one per core
      --watch            reload a service when its config file or directory changes
  switchyard validate <config...> [--set path=value]    check configs; exit 1 on any error
  switchyard schema [--out file]                         print the service config JSON Schema
  switchyard ps                                          the services running on this machine, with their URLs
  switchyard plugins [<name>]                            plugins and resource types: folder, options, needs/provides
  switchyard health <service> | config <service> | reload <service> [--data]
                                                         the admin listener of a running service (health --help)
  switchyard admin <status|stats|slow-queries|connections> [--service S | --url URL] [--token T] [--json]
                                                         diagnostics of a running datastore (admin --help)
  switchyard --version                                   the version
`;

const commandUsage: Record<string, string> = {
  serve: `usage: switchyard serve <config...> [--set path=value ...] [--workers N|auto] [--watch]
  Runs every service of the given config files in this process (or N worker processes).
  --set path=value   override one config value, e.g. --set listen.port=0 (repeatable)
  --workers N|auto   N worker processes sharing the listeners (node:cluster); auto: one per core
  --watch            reload a service when its config file or directory changes
`,
  validate: `usage: switchyard validate <config...> [--set path=value ...]
  Checks each config file as serve would (schema, plugin options, references, pipeline order)
  without starting anything; exit 1 on any problem.
`,
  schema: `usage: switchyard schema [--out file]
  Prints the JSON Schema of service configs (every plugin's options included), for editors.
`,
  ps: `usage: switchyard ps [--json]
  The services \`switchyard serve\` runs on this machine (as this user): name, pid, URLs.
`,
};

/** Options each command takes; anything else is refused with one line. */
const commandOptions = {
  serve: {
    set: { type: 'string', multiple: true },
    workers: { type: 'string' },
    watch: { type: 'boolean' },
  },
  validate: { set: { type: 'string', multiple: true } },
  schema: { out: { type: 'string' } },
  ps: { json: { type: 'boolean' } },
} as const;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const io = processIo;
  if (command === '--version' || command === '-v' || command === 'version') {
    io.out(`switchyard ${version()}\n`);
    return 0;
  }
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    io.out(usage);
    return 0;
  }
  // These parse options of their own.
  if (command === 'admin') return (await import('./admin.ts')).admin(rest);
  if (command === 'health' || command === 'config' || command === 'reload') {
    return (await import('./control.ts')).control(command, rest, io);
  }
  if (command === 'plugins') return (await import('./plugins.ts')).plugins(rest, io);
  if (!(command in commandOptions)) {
    return fail(`unknown command ${command}`);
  }
  const name = command as keyof typeof commandOptions;
  let values: { set?: string[]; workers?: string; watch?: boolean; out?: string; json?: boolean; help?: boolean };
  let positionals: string[];
  try {
    const options: ParseArgsConfig['options'] = { ...commandOptions[name], help: { type: 'boolean', short: 'h' } };
    const parsed = parseArgs({ args: rest, allowPositionals: true, options });
    values = parsed.values as typeof values;
    positionals = parsed.positionals;
  } catch (err) {
    // parseArgs says e.g. "Unknown option '--port'. To specify a positional argument…": the first sentence.
    return fail(`${command}: ${lowerFirst((err as Error).message.split('. ')[0] ?? '')}`, command);
  }
  if (values.help) {
    io.out(commandUsage[name] ?? usage);
    return 0;
  }
  const set = values.set ?? [];
  switch (name) {
    case 'serve': {
      if (positionals.length === 0) return fail('serve needs at least one config file', 'serve');
      if (cluster.isWorker) {
        // A worker forked by `serve --workers`: it reruns this command line (runtime/cluster.ts).
        const { runWorker } = await import('../cluster.ts');
        await runWorker(positionals, { set }).catch(() => process.exit(1));
        return -1;
      }
      const workers = parseWorkers(values.workers);
      if (workers === undefined) return fail('--workers takes a positive integer or "auto"', 'serve');
      if (workers > 0) {
        try {
          const { ClusterPrimary } = await import('../cluster.ts');
          const primary = await ClusterPrimary.start(positionals, { set, workers, watch: values.watch });
          primary.handleSignals();
          const runs: RunEntry[] = [];
          for (const [i, s] of primary.services.entries()) {
            const p = s.ports;
            const url = `http://127.0.0.1:${p.main}`;
            process.stderr.write(
              `${s.name}: ${url}${p.metrics ? `  metrics :${p.metrics}` : ''}${p.admin ? `  admin :${p.admin}` : ''}  (${workers} workers)\n`,
            );
            runs.push(runEntry(s.name, positionals[i] ?? '', url, p, s.hosts));
          }
          removeRunsAtExit(recordRun(runs));
          return -1;
        } catch (err) {
          return report(err);
        }
      }
      try {
        const began = performance.now();
        const { Gateway } = await import('../gateway.ts');
        const gateway = await Gateway.start(positionals, { set, watch: values.watch });
        gateway.handleSignals();
        const runs: RunEntry[] = [];
        // The ready banner: every service, where it answers, and whether all it needs is there.
        const states = await Promise.all(gateway.services.map((s) => stateOf(s)));
        const seconds = ((performance.now() - began) / 1000).toFixed(1);
        const count = gateway.services.length;
        process.stderr.write(`switchyard ${version()}: ${count} service${count === 1 ? '' : 's'} up in ${seconds} s\n`);
        for (const [i, s] of gateway.services.entries()) {
          const p = s.info.ports;
          const url = s.info.mainUrl ?? '';
          process.stderr.write(
            `${s.info.name}: ${url}${p.metrics ? `  metrics :${p.metrics}` : ''}${p.admin ? `  admin :${p.admin}` : ''}  ${states[i]}\n`,
          );
          const config = s.graph.loaded.config;
          runs.push(
            runEntry(s.info.name, s.file, url, p, { metrics: config.metrics?.host, admin: config.admin?.host }),
          );
        }
        removeRunsAtExit(recordRun(runs));
        return -1; // keep running
      } catch (err) {
        return report(err);
      }
    }
    case 'validate': {
      if (positionals.length === 0) return fail('validate needs at least one config file', 'validate');
      let failed = false;
      const { loadService } = await import('../config/load.ts');
      for (const file of positionals) {
        try {
          await loadService(file, { set });
          process.stdout.write(`${file}: ok\n`);
        } catch (err) {
          failed = true;
          report(err);
        }
      }
      return failed ? 1 : 0;
    }
    case 'schema': {
      if (positionals.length > 0) return fail(`schema: unexpected argument ${positionals[0]}`, 'schema');
      const [{ loadCatalog }, { fullServiceSchema }] = await Promise.all([
        import('../catalog.ts'),
        import('../config/service-schema.ts'),
      ]);
      const catalog = await loadCatalog();
      const text = `${JSON.stringify(fullServiceSchema(catalog.all()), null, 2)}\n`;
      if (values.out) writeFileSync(values.out, text);
      else process.stdout.write(text);
      return 0;
    }
    case 'ps': {
      const runs = listRuns();
      if (values.json) io.out(`${JSON.stringify(runs, null, 2)}\n`);
      else if (runs.length === 0) io.out('no service is running (as recorded by switchyard serve)\n');
      else {
        const rows = runs.map((r) => [r.service, String(r.pid), r.url, r.admin ?? '-', r.metrics ?? '-']);
        io.out(
          `${renderTable([{ title: 'SERVICE' }, { title: 'PID', align: 'right' }, { title: 'URL' }, { title: 'ADMIN' }, { title: 'METRICS' }], rows)}\n`,
        );
      }
      return 0;
    }
  }
}

/** `ok`, or `degraded: upstream:llm (connection refused), …` from the service's health checks. */
async function stateOf(service: Gateway['services'][number]): Promise<string> {
  try {
    const { ok, checks } = await service.health();
    if (ok) return 'ok';
    const bad = Object.entries(checks).filter(([, c]) => !c.ok);
    // A stage's check repeats its upstream's or resource's: name those, stages only when alone.
    const own = bad.filter(([name]) => !name.startsWith('stage:'));
    const failing = (own.length > 0 ? own : bad).map(([name, c]) => `${name} (${c.error ?? c.status})`);
    return `degraded: ${failing.join(', ')}`;
  } catch (err) {
    return `health unknown: ${(err as Error).message}`;
  }
}

function runEntry(
  service: string,
  file: string,
  url: string,
  ports: { metrics?: number; admin?: number },
  hosts: { metrics?: string; admin?: string } = {},
): RunEntry {
  return {
    service,
    pid: process.pid,
    config: resolve(file),
    url,
    ...(ports.admin ? { admin: localUrl(hosts.admin ?? '127.0.0.1', ports.admin) } : {}),
    ...(ports.metrics ? { metrics: localUrl(hosts.metrics ?? '127.0.0.1', ports.metrics) } : {}),
    started_at: new Date().toISOString(),
  };
}

/** The registry entries go when the process ends, however it ends (signals end it via exit()). */
function removeRunsAtExit(remove: () => void): void {
  process.once('exit', remove);
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}

let cachedVersion: string | undefined;

/** The package version (package.json above runtime/, or above dist/runtime/ in the compiled build). */
export function version(): string {
  if (cachedVersion === undefined) {
    const here = new URL('../../package.json', import.meta.url);
    const file = existsSync(here) ? here : new URL('../../../package.json', import.meta.url);
    cachedVersion = (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  }
  return cachedVersion;
}

/** 0 without --workers (one process); undefined when the value is not valid. */
function parseWorkers(value: string | undefined): number | undefined {
  if (value === undefined) return 0;
  if (value === 'auto') return availableParallelism();
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}

/** One line on stderr, pointing at the command's help; exit status 2. */
function fail(message: string, command?: string): number {
  process.stderr.write(`switchyard: ${message} (see switchyard ${command ? `${command} ` : ''}--help)\n`);
  return 2;
}

function report(err: unknown): number {
  if (err instanceof ConfigError) {
    for (const p of err.problems) process.stderr.write(`${formatProblem(p)}\n`);
  } else {
    process.stderr.write(`switchyard: ${(err as Error).message}\n`);
  }
  return 1;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const code = await main(process.argv.slice(2));
  // Exit once stdout is flushed: a piped stdout is asynchronous and would be cut short.
  if (code >= 0) process.stdout.write('', () => process.exit(code));
}
