/**
 * Where `switchyard serve` records the services it runs (one small JSON file per service), so that
 * `switchyard health|config|reload|admin <service>` find a service by its name instead of a port
 * (seven services of one stack have seven). No secret is written: tokens come from the command
 * line, the environment or the config file. An entry whose process is gone is ignored.
 *
 * The folder is $SWITCHYARD_RUN_DIR, else <tmpdir>/switchyard-<uid>; it is private to the user.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RunEntry {
  service: string;
  pid: number;
  /** The config file the service was started from (absolute). */
  config: string;
  /** Base URLs of its listeners, as this machine reaches them. */
  url: string;
  admin?: string;
  metrics?: string;
  started_at: string;
}

type Env = Record<string, string | undefined>;

export function runDir(env: Env = process.env): string {
  return env.SWITCHYARD_RUN_DIR || join(tmpdir(), `switchyard-${process.getuid?.() ?? 'user'}`);
}

/** A file name from a service name: nothing but letters, digits, `.`, `_` and `-`. */
function entryFile(dir: string, service: string): string {
  return join(dir, `${service.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);
}

/**
 * Records the entries; returns what removes them again (only files that still name this process:
 * a newer run of the same service keeps its own). Best effort: a read-only disk never stops a
 * service from serving.
 */
export function recordRun(entries: RunEntry[], env: Env = process.env): () => void {
  const dir = runDir(env);
  const written: string[] = [];
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const entry of entries) {
      const file = entryFile(dir, entry.service);
      writeFileSync(file, `${JSON.stringify(entry, null, 2)}\n`, { mode: 0o600 });
      written.push(file);
    }
  } catch {
    // Finding services by name is a convenience; URLs still work.
  }
  return () => {
    for (const file of written) {
      if (readEntry(file)?.pid === process.pid) rmSync(file, { force: true });
    }
  };
}

/** The running service of that name, if its process is still alive. */
export function findRun(service: string, env: Env = process.env): RunEntry | undefined {
  const entry = readEntry(entryFile(runDir(env), service));
  return entry && alive(entry.pid) ? entry : undefined;
}

/** Every recorded service whose process is alive, by name. */
export function listRuns(env: Env = process.env): RunEntry[] {
  const dir = runDir(env);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  return names
    .map((n) => readEntry(join(dir, n)))
    .filter((e): e is RunEntry => e !== undefined && alive(e.pid))
    .sort((a, b) => a.service.localeCompare(b.service));
}

function readEntry(file: string): RunEntry | undefined {
  try {
    const entry = JSON.parse(readFileSync(file, 'utf8')) as RunEntry;
    return typeof entry.service === 'string' && Number.isInteger(entry.pid) && typeof entry.url === 'string'
      ? entry
      : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
