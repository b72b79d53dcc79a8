/**
 * `npx tsx bench/safety-filter/chunk-instructions.ts`: instructions per streamed chunk of the
 * egress stream check (as chunk-check.ts runs it), counted by `valgrind --tool=callgrind`, so the
 * figure does not depend on the machine's load. Each checkout's check runs in its own process
 * under callgrind: WARM chunks first (uncounted: start-up, module loading, the JIT's warm-up), then
 * N chunks inside a `vm` script run, and callgrind counts only the main thread's instructions
 * within that run (`--toggle-collect` on node's ContextifyScript::RunInContext); the figure
 * is (I(2N) - I(N)) / N. It includes the garbage collection the chunks cause on the main
 * thread; V8 runs without helper threads (`--single-threaded`, see v8Flags), so compilation and
 * marking are the main thread's too, and two runs of one checkout agree to 0.1%. Slow (callgrind
 * runs node ~50x slower).
 *
 * Env: CHUNKS (N, default 5000), WARM (20000), CHUNK_CHARS (4), TEXT (`prose` or `mixed`, as in
 * chunk-check.ts), BASELINE (another checkout, e.g. a `git worktree` of the commit to compare
 * with: counted too, and the ratio printed). Needs valgrind and a node binary with symbols.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import { benchEvents, benchText, feed, filterOf } from './chunk-filter.ts';

const size = Number(process.env.CHUNK_CHARS ?? 4);
const warm = Number(process.env.WARM ?? 20_000);
const text = benchText(process.env.TEXT);

// The child: one checkout's check over WARM + COUNT chunks, then exit (callgrind counts the process).
if (process.env.CHUNK_INSTRUCTIONS_CHECKOUT) {
  const count = Number(process.env.CHUNK_INSTRUCTIONS_COUNT);
  const filter = await filterOf(process.env.CHUNK_INSTRUCTIONS_CHECKOUT);
  const events = benchEvents(warm + count, size, text);
  const f = filter();
  let out = feed(f, events.slice(0, warm));
  const measured = events.slice(warm);
  // Counted: what runs inside this script's run (callgrind's --toggle-collect).
  (globalThis as { countedRun?: () => number }).countedRun = () => feed(f, measured);
  out += new Script('countedRun()').runInThisContext() as number;
  process.stdout.write(`${out}\n`);
  process.exit(0);
}

const n = Number(process.env.CHUNKS ?? 5000);
execFileSync('valgrind', ['--version']);
const dir = mkdtempSync(join(tmpdir(), 'chunk-instructions-'));
const self = fileURLToPath(import.meta.url);

/**
 * V8 without background threads (`--single-threaded`: compilation and garbage collection on the
 * main thread, when they are due). With them, the main thread's count depended on when callgrind
 * (which runs one thread at a time) let a compile job finish: the same checkout measured 43k and
 * 87k instructions per chunk in two runs on a quiet machine. NODE_FLAGS replaces the default.
 */
const v8Flags = (process.env.NODE_FLAGS ?? '--single-threaded').split(' ').filter(Boolean);

/** Instructions (callgrind's Ir) of one child process. */
function instructions(checkout: string, count: number): number {
  const out = join(dir, `callgrind.${count}`);
  const run = spawnSync(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      '--smc-check=all-non-file',
      '--collect-atstart=no',
      '--toggle-collect=node::contextify::ContextifyScript::RunInContext*',
      process.execPath,
      ...v8Flags,
      '--import',
      'tsx',
      self,
    ],
    {
      env: { ...process.env, CHUNK_INSTRUCTIONS_CHECKOUT: checkout, CHUNK_INSTRUCTIONS_COUNT: String(count) },
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const collected = /Collected : (\d+)/.exec(run.stderr);
  if (run.status !== 0 || !collected)
    throw new Error(`callgrind run failed (${run.status}):\n${run.stderr.slice(-2000)}`);
  return Number(collected[1]);
}

/**
 * Instructions per chunk of a checkout's check: the difference between 2N chunks and N, over N
 * (what is counted once per run, such as a garbage collection of the warm-up's heap, cancels out).
 */
function perChunk(checkout: string): number {
  const one = instructions(checkout, n);
  const two = instructions(checkout, 2 * n);
  const marginal = (two - one) / n;
  console.log(
    `${checkout}: ${marginal.toFixed(0)} instructions per chunk ((I(${2 * n}) - I(${n})) / ${n}; ` +
      `${(one / n).toFixed(0)} over ${n} alone, ${(two / (2 * n)).toFixed(0)} over ${2 * n}; after ${warm})`,
  );
  return marginal;
}

try {
  const mine = perChunk(resolve('.'));
  if (process.env.BASELINE) {
    const base = perChunk(resolve(process.env.BASELINE));
    console.log(
      `instructions per chunk: this checkout ${mine.toFixed(0)}, baseline ${base.toFixed(0)} (${(mine / base).toFixed(2)}x); ${size}-character chunks, text ${process.env.TEXT ?? 'prose'}`,
    );
  } else {
    console.log(
      `instructions per chunk: ${mine.toFixed(0)}; ${size}-character chunks, text ${process.env.TEXT ?? 'prose'}`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
