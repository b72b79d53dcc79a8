/**
 * `switchyard` command line: serve, validate, schema, admin.
 */
import cluster from 'node:cluster';
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { loadCatalog } from '../catalog.ts';
import { ClusterPrimary, runWorker } from '../cluster.ts';
import { loadService } from '../config/load.ts';
import { fullServiceSchema } from '../config/service-schema.ts';
import { ConfigError, formatProblem } from '../config/source.ts';
import { Gateway } from '../gateway.ts';
import { admin } from './admin.ts';

const usage = `usage:
  switchyard serve <config...> [--set path=value ...]   run services
      --workers N|auto   N worker processes sharing the listeners (node:cluster); auto: one per core
      --watch            reload a service when its config file or directory changes
  switchyard validate <config...> [--set path=value]    check configs; exit 1 on any error
  switchyard schema [--out file]                         print the service config JSON Schema
  switchyard admin <status|stats|slow-queries|connections> [--url URL] [--token T] [--json]
                                                         diagnostics of a running service (admin --help)
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // `admin` has options of its own (runtime/cli/admin.ts).
  if (command === 'admin') return admin(rest);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      set: { type: 'string', multiple: true },
      out: { type: 'string' },
      help: { type: 'boolean' },
      workers: { type: 'string' },
      watch: { type: 'boolean' },
    },
  });
  const set = values.set ?? [];
  switch (command) {
    case 'serve': {
      if (positionals.length === 0) return fail('serve needs at least one config file');
      if (cluster.isWorker) {
        // A worker forked by `serve --workers`: it reruns this command line (runtime/cluster.ts).
        await runWorker(positionals, { set }).catch(() => process.exit(1));
        return -1;
      }
      const workers = parseWorkers(values.workers);
      if (workers === undefined) return fail('--workers takes a positive integer or "auto"');
      if (workers > 0) {
        try {
          const primary = await ClusterPrimary.start(positionals, { set, workers, watch: values.watch });
          primary.handleSignals();
          for (const s of primary.services) {
            const p = s.ports;
            process.stderr.write(
              `${s.name}: http://127.0.0.1:${p.main}${p.metrics ? `  metrics :${p.metrics}` : ''}${p.admin ? `  admin :${p.admin}` : ''}  (${workers} workers)\n`,
            );
          }
          return -1;
        } catch (err) {
          return report(err);
        }
      }
      try {
        const gateway = await Gateway.start(positionals, { set, watch: values.watch });
        gateway.handleSignals();
        for (const s of gateway.services) {
          const p = s.info.ports;
          process.stderr.write(
            `${s.info.name}: ${s.info.mainUrl}${p.metrics ? `  metrics :${p.metrics}` : ''}${p.admin ? `  admin :${p.admin}` : ''}\n`,
          );
        }
        return -1; // keep running
      } catch (err) {
        return report(err);
      }
    }
    case 'validate': {
      if (positionals.length === 0) return fail('validate needs at least one config file');
      let failed = false;
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
      const catalog = await loadCatalog();
      const text = `${JSON.stringify(fullServiceSchema(catalog.all()), null, 2)}\n`;
      if (values.out) writeFileSync(values.out, text);
      else process.stdout.write(text);
      return 0;
    }
    default:
      process.stdout.write(usage);
      return command === undefined || command === 'help' || values.help ? 0 : 2;
  }
}

/** 0 without --workers (one process); undefined when the value is not valid. */
function parseWorkers(value: string | undefined): number | undefined {
  if (value === undefined) return 0;
  if (value === 'auto') return availableParallelism();
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}

function fail(message: string): number {
  process.stderr.write(`switchyard: ${message}\n${usage}`);
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
