/**
 * The process side of the benchmark runners: settings from the environment, target servers
 * started pinned and awaited, one load-generator run, and the main wrapper that always stops
 * every child (at the end, on error and on Ctrl-C).
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { killAllNow, runToEnd, type Started, start, stopAll, waitForLine } from '../typed-proxy/children.ts';
import type { LoadJob, LoadResult } from '../typed-proxy/loadgen.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const loadgen = fileURLToPath(new URL('../typed-proxy/loadgen.ts', import.meta.url));

/** A positive number from the environment, else the default. */
export const envNum = (name: string, def: number) => {
  const n = Number(process.env[name] ?? def);
  return Number.isFinite(n) && n > 0 ? n : def;
};

/** A node:http server of bench/ (run with tsx) that prints `listening <port>` once it listens on PORT=0. */
export async function startNodeServer(
  file: string,
  env: Record<string, string>,
  cpu: string | undefined,
  nodeFlags: string[] = [],
): Promise<{ s: Started; port: number }> {
  const s = start(process.execPath, [...nodeFlags, '--import', 'tsx', file], {
    cpu,
    cwd: root,
    env: { ...process.env, ...env, PORT: '0' },
  });
  const m = await waitForLine(s, /listening (\d+)/, 15000);
  s.child.stdout?.resume();
  return { s, port: Number(m[1]) };
}

/** Retries `probe` every 250 ms until it succeeds; fails when the child exits or `timeoutMs` runs out. */
export async function waitUntilReady(
  s: Started,
  name: string,
  timeoutMs: number,
  probe: () => Promise<unknown>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    if (s.child.exitCode !== null) throw new Error(`${name} exited (${s.child.exitCode}):\n${s.output()}`);
    try {
      await probe();
      return;
    } catch (err) {
      last = err;
      await sleep(250);
    }
  }
  throw new Error(`${name} not ready after ${timeoutMs / 1000} s: ${(last as Error)?.message}\n${s.output()}`);
}

/**
 * `entry` as one plain JavaScript file (esbuild, tsx's own dependency) in node_modules/.cache, so
 * that its bare imports resolve from the checkout's node_modules: a bare node then starts it
 * instead of tsx transforming it again (seconds on a busy machine, many minutes under valgrind).
 * Removed when this process exits. Throws when esbuild cannot be loaded.
 */
export async function bundleForNode(entry: string, name: string): Promise<string> {
  const esbuild = (await import('esbuild' as string)) as { build(o: Record<string, unknown>): Promise<unknown> };
  const dir = join(root, 'node_modules', '.cache', 'switchyard-bench');
  mkdirSync(dir, { recursive: true });
  const outfile = join(dir, `${name}-${process.pid}.mjs`);
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node}`,
    logLevel: 'silent',
  });
  process.once('exit', () => rmSync(outfile, { force: true }));
  return outfile;
}

/** The load generator, bundled once per run (bundleForNode); tsx when esbuild cannot be loaded. */
let compiled: Promise<string[]> | undefined;
function loadgenCommand(): Promise<string[]> {
  compiled ??= bundleForNode(loadgen, 'loadgen').then(
    (file) => [file],
    () => ['--import', 'tsx', loadgen],
  );
  return compiled;
}

/** One closed-loop measurement by bench/typed-proxy/loadgen.ts in its own (pinned) process. */
export async function runLoad(job: LoadJob, cpu: string | undefined): Promise<LoadResult> {
  const args = [...(await loadgenCommand()), JSON.stringify(job)];
  const out = await runToEnd(process.execPath, args, { cpu, cwd: root });
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
}

/**
 * CPU a process spent per completed request of the window, µs: its threads' scheduler run time
 * where /proc has it (exact), else utime + stime in clock ticks (10 ms resolution, and biased when
 * many processes share the core).
 */
export const cpuUsPerRequest = (r: LoadResult, pid: number, clockTicks: number) => {
  if (!r.requests) return Number.NaN;
  const ns = r.cpuNs?.[pid];
  return ns !== undefined ? ns / 1000 / r.requests : ((r.cpuTicks[pid] / clockTicks) * 1e6) / r.requests;
};

/**
 * Runs `main` and exits with its code (130 on SIGINT/SIGTERM, 1 on a throw), stopping every
 * child and removing `logDir` (unless kept) whatever happens.
 */
export async function runBench(main: () => Promise<number>, o: { logDir: string; keepLogs: boolean }): Promise<void> {
  let exitCode = 1;
  let interrupted = false;
  let cleaning: Promise<void> | undefined;
  const cleanup = () => {
    cleaning ??= (async () => {
      await stopAll();
      if (!o.keepLogs) rmSync(o.logDir, { recursive: true, force: true });
      else console.log(`logs kept in ${o.logDir}`);
    })();
    return cleaning;
  };
  process.on('exit', killAllNow);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      interrupted = true;
      console.log(`\n${signal}: stopping`);
      cleanup().finally(() => process.exit(130));
    });
  }
  try {
    exitCode = await main();
  } catch (err) {
    if (!interrupted) console.error(`bench failed: ${(err as Error).stack ?? err}`);
  } finally {
    await cleanup();
  }
  process.exit(interrupted ? 130 : exitCode);
}
