/**
 * Where `switchyard serve` records the services it runs (one small JSON file per service), so that
 * `switchyard health|config|reload|admin <service>` find a service by its name instead of a port
 * (seven services of one stack have seven). No secret is written: tokens come from the command
 * line, the environment or the config file. An entry whose process is gone is ignored.
 *
 * The folder is $SWITCHYARD_RUN_DIR, else <tmpdir>/switchyard-<uid>; it must be the user's own
 * directory, writable by nobody else, or it is not used at all: in a shared /tmp another user could
 * otherwise plant entries (sending `--token` to a URL of theirs) or links (overwriting files).
 */
import {
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
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

/** The registry folder if it is safe to use: a real directory of this user, not group/world-writable. */
function privateDir(env: Env, create: boolean): string | undefined {
  const dir = runDir(env);
  try {
    if (create) mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    const mine = process.getuid === undefined || st.uid === process.getuid();
    return st.isDirectory() && mine && (st.mode & 0o022) === 0 ? dir : undefined;
  } catch {
    return undefined;
  }
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
  const dir = privateDir(env, true);
  const written: string[] = [];
  if (!dir) return () => {};
  try {
    for (const entry of entries) {
      const file = entryFile(dir, entry.service);
      // O_NOFOLLOW: a link planted in place of the entry is not followed.
      const fd = openSync(
        file,
        constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
        0o600,
      );
      try {
        writeSync(fd, `${JSON.stringify(entry, null, 2)}\n`);
      } finally {
        closeSync(fd);
      }
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
  const dir = privateDir(env, false);
  if (!dir) return undefined;
  const entry = readEntry(entryFile(dir, service));
  return entry && alive(entry.pid) ? entry : undefined;
}

/** Every recorded service whose process is alive, by name. */
export function listRuns(env: Env = process.env): RunEntry[] {
  const dir = privateDir(env, false);
  if (!dir) return [];
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
