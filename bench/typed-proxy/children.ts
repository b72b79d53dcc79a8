/**
 * Child processes of the benchmark: started pinned to a core with taskset (which execs, so the
 * child's pid is the measured process itself), tracked, and always killed at the end, on error
 * and on SIGINT/SIGTERM.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const live = new Set<ChildProcess>();

export interface Started {
  child: ChildProcess;
  pid: number;
  /** Path of the file stdout and stderr go to, when one was given. */
  logFile?: string;
  /** What the child wrote to stdout/stderr so far (piped children only; last 16 KB). */
  output(): string;
}

/** Whether `taskset` is usable here (util-linux). */
export function hasTaskset(): boolean {
  return spawnSync('taskset', ['-c', '0', 'true']).status === 0;
}

export interface SpawnOptions {
  /** Core list for taskset (`1`, `0-1`); undefined runs unpinned. */
  cpu?: string;
  env?: NodeJS.ProcessEnv;
  cwd: string;
  /** Send stdout and stderr to this file instead of a pipe (keeps a chatty child's logs off the parent). */
  logFile?: string;
}

export function start(command: string, args: string[], o: SpawnOptions): Started {
  const [cmd, argv] = o.cpu === undefined ? [command, args] : ['taskset', ['-c', o.cpu, command, ...args]];
  const fd = o.logFile ? openSync(o.logFile, 'w') : undefined;
  const child = spawn(cmd, argv, {
    cwd: o.cwd,
    env: o.env ?? process.env,
    stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd],
  });
  if (fd !== undefined) closeSync(fd);
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  live.add(child);
  child.once('exit', () => live.delete(child));
  let buffer = '';
  const keep = (chunk: Buffer) => {
    buffer = (buffer + chunk.toString('utf8')).slice(-16384);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return {
    child,
    pid: child.pid,
    logFile: o.logFile,
    output: () => (o.logFile ? tail(o.logFile) : buffer),
  };
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-16384);
  } catch {
    return '';
  }
}

/** Resolves with the first stdout line matching `pattern`; rejects if the child exits first or time runs out. */
export function waitForLine(s: Started, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => done(new Error(`timed out waiting for ${pattern}: ${s.output()}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString('utf8');
      const m = seen.match(pattern);
      if (m) done(undefined, m);
    };
    const onExit = (code: number | null) => done(new Error(`exited (${code}) before ready: ${s.output()}`));
    const done = (err?: Error, m?: RegExpMatchArray) => {
      clearTimeout(timer);
      s.child.stdout?.off('data', onData);
      s.child.off('exit', onExit);
      if (err) reject(err);
      else resolve(m!);
    };
    s.child.stdout?.on('data', onData);
    s.child.once('exit', onExit);
  });
}

/** An unused TCP port on 127.0.0.1 (closed again at once, so in principle racy; fine on a quiet host). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a child to completion and returns its stdout (stderr is kept for the error message). */
export function runToEnd(command: string, args: string[], o: SpawnOptions): Promise<string> {
  const s = start(command, args, o);
  return new Promise((resolve, reject) => {
    let out = '';
    s.child.stdout?.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    // 'close', not 'exit': stdout may still hold data when the process has exited.
    s.child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${s.output()}`))));
  });
}

/** SIGTERM, then SIGKILL for whatever is still alive after `graceMs`. */
export async function stop(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((c) => stop(c)));
}

/** Last resort on exit: synchronous SIGKILL of every child still running. */
export function killAllNow(): void {
  for (const c of live) {
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}
